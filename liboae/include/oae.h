/* liboae: Open Atomic Ethernet verbs from C. Generated from liboae/src by
 * `cargo xtask c-header`: do not edit. See examples/c/ and docs/RUNNING.md. */

#ifndef OAE_H
#define OAE_H

#include <stdint.h>

// Most bytes a WRITE carries through the host ring (9 fewer once
// `oae_queue_to_node` or `oae_queue_to_link` names where verbs go).
#define OAE_MAX_DATA 374

// Most bytes a READ or BILATERAL SWAP moves: they land in the dataplane's
// registered memory, not in the completion.
#define OAE_MAX_BLOCK 960

// Most bytes a WRITE or READ on a local block moves (`oae_post_write_local`,
// `oae_post_read`): 64 frames, split into verbs of a frame each and
// completed once.
#define OAE_MAX_TRANSFER 61440

// Most bytes a SEND carries through the host ring to a named node or link
// (9 more to the ring queue's first link), and a receive holds.
#define OAE_MAX_MESSAGE 370

// A NULL pointer or an argument out of range; see `oae_last_error`.
#define OAE_ERR_INVALID -1

// The host ring is full: poll completions, then post again.
#define OAE_ERR_AGAIN -2

// The host ring could not be attached; `oae_last_error` says why.
#define OAE_ERR_ATTACH -3

// The dataplane's control socket refused or did not answer.
#define OAE_ERR_CONTROL -4

// `oae_region_register`: the dataplane already has a region of that id.
#define OAE_ERR_EXISTS -5

// `oae_post_send`'s flag: the message carries `imm`.
#define OAE_SEND_WITH_IMM 1

// A RECV completion's `wc_flags`: the message came with `imm_data`.
#define OAE_WC_WITH_IMM 1

#define OAE_OP_READ 0

#define OAE_OP_WRITE 1

#define OAE_OP_CAS 2

#define OAE_OP_FAA 3

#define OAE_OP_SWAP 4

#define OAE_OP_MCAS 5

#define OAE_OP_BSWAP 6

#define OAE_OP_SEND 7

// A receive's completion: a message filled it (or it was refused).
#define OAE_OP_RECV 8

// A completion for an id this queue did not post (never expected).
#define OAE_OP_UNKNOWN 255

#define OAE_WC_SUCCESS 0

#define OAE_WC_REFUSED_NO_CREDIT 1

#define OAE_WC_REFUSED_UNKNOWN_REGION 2

#define OAE_WC_REFUSED_BAD_KEY 3

#define OAE_WC_REFUSED_OUT_OF_BOUNDS 4

#define OAE_WC_REFUSED_MALFORMED 5

#define OAE_WC_REFUSED_FORBIDDEN 6

#define OAE_WC_REFUSED_LOCKED 7

#define OAE_WC_REFUSED_MISALIGNED 8

#define OAE_WC_REFUSED_NO_RECEIVE 9

#define OAE_WC_REFUSED_RECEIVE_TOO_SMALL 10

#define OAE_WC_UNREACHABLE 16

#define OAE_WC_PEER_RESTARTED 17

#define OAE_WC_ECHO_MISSING 18

#define OAE_WC_ECHO_MISMATCH 19

#define OAE_WC_LOCAL_LOCKED 20

#define OAE_WC_TOO_LARGE 21

#define OAE_WC_NOT_SUBMITTED 32

#define OAE_WC_QUEUE_FULL 33

#define OAE_WC_SHUTTING_DOWN 34

#define OAE_WC_NOT_FOR_TRANSPORT 35

#define OAE_WC_UNDECODABLE 36

#define OAE_WC_INVALID 37

#define OAE_WC_NO_SUCH_LINK 38

#define OAE_WC_QP_FAILED 39

#define OAE_WC_NO_ROUTE 40

#define OAE_WC_RECALLED 41

// A host program's queue on a dataplane's host ring. Opaque to C.
typedef struct oae_queue oae_queue;

// One word of a multi-word commit.
typedef struct oae_mcas_word {
  // Byte offset in the region, 8-aligned.
  uint32_t offset;
  uint64_t expected;
  uint64_t desired;
} oae_mcas_word;

// A completion: the verb's `wr_id`, its status (`OAE_WC_*`) and, on
// success, its result.
typedef struct oae_wc {
  uint64_t wr_id;
  // `OAE_WC_SUCCESS`, or why the verb had no effect at the target.
  uint32_t status;
  // `OAE_OP_*`: which verb this completes.
  uint32_t opcode;
  // From the dataplane's burst that took the verb to the one that
  // completed it, in nanoseconds.
  uint64_t latency_ns;
  // CAS, FETCH-ADD, SWAP: the word before the verb.
  uint64_t old;
  // CAS: 1 if it swapped.
  uint8_t swapped;
  // MULTI-WORD COMMIT: 1 if every word matched and all were written.
  uint8_t committed;
  // MULTI-WORD COMMIT: words in `mcas_old`.
  uint8_t count;
  uint8_t reserved;
  // READ, BILATERAL SWAP: bytes that landed in the verb's local block
  // (read them with `oae_region_read`). RECV: the message's length.
  uint32_t len;
  // RECV: `OAE_WC_WITH_IMM` if the message came with `imm_data`.
  uint32_t wc_flags;
  // RECV: the SEND's immediate data.
  uint32_t imm_data;
  // MULTI-WORD COMMIT: each word before the verb.
  uint64_t mcas_old[8];
} oae_wc;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The details of the last call that failed on this thread (an empty
// string if none did). Valid until the next failing call on the thread.
const char *oae_last_error(void);

// What a code means: an `OAE_ERR_*` a function returned, or an
// `OAE_WC_*` status of a completion. Never NULL; a static string.
const char *oae_strerror(int code);

// Attaches to the host ring at `ring_path` (the `[host] ring` of a running
// `oaed`), waiting up to about a second for the dataplane to create it.
// On success stores the queue in `*queue` and returns 0.
//
// # Safety
// `ring_path` is a NUL-terminated string; `queue` points to writable
// storage for one pointer.
int oae_queue_open(const char *ring_path, struct oae_queue **queue);

// Detaches and frees the queue. Verbs still in flight complete at the
// dataplane, unseen. NULL is ignored.
//
// # Safety
// `queue` is NULL or a queue from `oae_queue_open` not closed before.
void oae_queue_close(struct oae_queue *queue);

// Verbs posted and not yet polled.
//
// # Safety
// `queue` is NULL or an open queue.
int oae_queue_outstanding(const struct oae_queue *queue);

// The slot of a bilateral ring this queue holds (each process its own),
// or 0 on a FITO ring (one process).
//
// # Safety
// `queue` is NULL or an open queue.
int oae_queue_slot(const struct oae_queue *queue);

// Sends the verbs posted on `queue` from now on to node `node` (its id),
// by the dataplane's link to it or a path through its fabric, instead of
// the ring queue's first link. A node the dataplane has no way to is
// refused verb by verb, `OAE_WC_NO_ROUTE`.
//
// # Safety
// `queue` is NULL or an open queue, used by one thread at a time.
int oae_queue_to_node(struct oae_queue *queue, uint64_t node);

// Sends the verbs posted on `queue` from now on to link `link` of the
// ring's queue (its peers in configuration order; 0 is where verbs go
// unless told otherwise). A link the queue does not have is refused verb
// by verb, `OAE_WC_NO_SUCH_LINK`.
//
// # Safety
// `queue` is NULL or an open queue, used by one thread at a time.
int oae_queue_to_link(struct oae_queue *queue, uint16_t link);

// Reads `len` bytes (at most `OAE_MAX_TRANSFER`) at `offset` of the
// peer's region `region` (key `key`) into the dataplane's own region
// `local_region` at `local_offset`, as an RDMA READ into a registered
// buffer. They have landed when the verb completes with
// `OAE_WC_SUCCESS`; read them in place (`oae_region_map`) or with
// `oae_region_read`. Up to `OAE_MAX_BLOCK` bytes, on any other status the
// local block is unchanged; longer, it goes as a READ a frame and
// completes once, and on failure each frame's block holds the peer's
// bytes or is unchanged.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_read(struct oae_queue *queue,
                  uint64_t wr_id,
                  uint16_t region,
                  uint32_t key,
                  uint32_t offset,
                  uint16_t local_region,
                  uint32_t local_offset,
                  uint32_t len);

// Writes `len` bytes from `data` at `offset` of the peer's region.
//
// # Safety
// `queue` is an open queue used by one thread at a time; `data` points
// to `len` readable bytes.
int oae_post_write(struct oae_queue *queue,
                   uint64_t wr_id,
                   uint16_t region,
                   uint32_t key,
                   uint32_t offset,
                   const uint8_t *data,
                   uint16_t len);

// Sends a message of `len` bytes (at most `OAE_MAX_MESSAGE`) from `data`
// into the next receive the peer posted on the link, with `imm` as its
// immediate data if `flags` has `OAE_SEND_WITH_IMM`. With no receive
// posted it completes `OAE_WC_REFUSED_NO_RECEIVE`, at once: nothing
// waits and retries.
//
// # Safety
// `queue` is an open queue used by one thread at a time; `data` points
// to `len` readable bytes.
int oae_post_send(struct oae_queue *queue,
                  uint64_t wr_id,
                  const uint8_t *data,
                  uint16_t len,
                  uint32_t flags,
                  uint32_t imm);

// Writes `len` bytes (at most `OAE_MAX_TRANSFER`) at `offset` of the
// peer's region, taken from this dataplane's region `local_region` at
// `local_offset` (which the program fills in place, `oae_region_map`)
// when the dataplane takes the verb, as an RDMA WRITE's bytes come from
// a registered buffer: the host ring carries the block's name, not its
// bytes. Longer than `OAE_MAX_BLOCK`, it goes as a WRITE a frame and
// completes once: `OAE_WC_SUCCESS` if every frame was written, otherwise
// the first failure (each frame is then written whole or not at all).
// Leave the block alone until the verb completes. A block outside the
// dataplane's regions completes `OAE_WC_INVALID`.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_write_local(struct oae_queue *queue,
                         uint64_t wr_id,
                         uint16_t region,
                         uint32_t key,
                         uint32_t offset,
                         uint16_t local_region,
                         uint32_t local_offset,
                         uint32_t len);

// Sends a message of `len` bytes (at most `OAE_MAX_BLOCK`) taken from
// this dataplane's region `local_region` at `local_offset`, as
// `oae_post_write_local` takes a WRITE's; otherwise as `oae_post_send`.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_send_local(struct oae_queue *queue,
                        uint64_t wr_id,
                        uint16_t local_region,
                        uint32_t local_offset,
                        uint16_t len,
                        uint32_t flags,
                        uint32_t imm);

// Posts a receive for the next message on the link verbs go to (the
// queue's first link, or the one `oae_queue_to_link`/`oae_queue_to_node`
// names): it lands in the dataplane's region `region` at `offset`, and at
// completion (`OAE_OP_RECV`) is copied into `buf`, `len` bytes at most
// (`OAE_MAX_MESSAGE`); the completion's `len` is the message's. A
// receive stays posted until a message fills it or the dataplane stops.
//
// # Safety
// `queue` is an open queue used by one thread at a time; `buf` points to
// `len` writable bytes, kept until the receive completes.
int oae_post_recv(struct oae_queue *queue,
                  uint64_t wr_id,
                  uint16_t region,
                  uint32_t offset,
                  uint8_t *buf,
                  uint16_t len);

// Compare-and-swap of the 8-byte word at `offset`: writes `desired` if it
// holds `expected`. The completion's `old` is the word before, `swapped`
// whether it was written.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_cas(struct oae_queue *queue,
                 uint64_t wr_id,
                 uint16_t region,
                 uint32_t key,
                 uint32_t offset,
                 uint64_t expected,
                 uint64_t desired);

// Adds `add` to the 8-byte word at `offset`; `old` is the word before.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_faa(struct oae_queue *queue,
                 uint64_t wr_id,
                 uint16_t region,
                 uint32_t key,
                 uint32_t offset,
                 uint64_t add);

// Writes `value` into the 8-byte word at `offset`; `old` is the word
// before.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_swap(struct oae_queue *queue,
                  uint64_t wr_id,
                  uint16_t region,
                  uint32_t key,
                  uint32_t offset,
                  uint64_t value);

// Multi-word commit: `count` (1 to 8) words, all written if all match.
//
// # Safety
// `queue` is an open queue used by one thread at a time; `words` points
// to `count` readable words.
int oae_post_mcas(struct oae_queue *queue,
                  uint64_t wr_id,
                  uint16_t region,
                  uint32_t key,
                  const struct oae_mcas_word *words,
                  uint8_t count);

// Bilateral swap: the peer's `len` bytes at `offset` and this dataplane's
// own region `local_region` at `local_offset` trade places, both or
// neither.
//
// # Safety
// `queue` is an open queue, used by one thread at a time.
int oae_post_bswap(struct oae_queue *queue,
                   uint64_t wr_id,
                   uint16_t region,
                   uint32_t key,
                   uint32_t offset,
                   uint16_t local_region,
                   uint32_t local_offset,
                   uint16_t len);

// Takes up to `max` completions into `wc`; returns how many (0 if none
// is ready), or a negative `OAE_ERR_*`.
//
// # Safety
// `queue` is an open queue used by one thread at a time; `wc` points to
// `max` writable completions.
int oae_poll_cq(struct oae_queue *queue, int max, struct oae_wc *wc);

// Registers a region of `len` bytes, id `id`, key `key`, permissions
// `perms` (any of "r", "w", "a") in the dataplane whose control socket is
// `control_socket` (e.g. "/run/oae/a.sock"): what its peers' verbs may
// reach. Its own memory is zeroed. `OAE_ERR_EXISTS` if it has a region
// of that id already.
//
// # Safety
// `control_socket` and `perms` are NUL-terminated strings.
int oae_region_register(const char *control_socket,
                        uint16_t id,
                        uint32_t key,
                        uint32_t len,
                        const char *perms);

// Stores in `*node` the node id of the dataplane whose control socket is
// `control_socket`: the address its peers name it by (`oae_queue_to_node`).
//
// # Safety
// `control_socket` is a NUL-terminated string; `node` points to writable
// storage for one `uint64_t`.
int oae_node_id(const char *control_socket, uint64_t *node);

// Maps region `id` of the dataplane whose host ring is `ring_path` into
// this process, readable and writable in place: where a READ or a
// BILATERAL SWAP lands and a receive's message is written, as an RDMA
// program's registered buffer. Stores its address in `*addr` and its
// length in bytes in `*len`; the mapping stays until the process exits
// (mapping a region again returns the same address). The dataplane
// changes its bytes while verbs run: read a block once the verb that
// lands in it has completed.
//
// # Safety
// `ring_path` is a NUL-terminated string; `addr` and `len` point to
// writable storage.
int oae_region_map(const char *ring_path, uint16_t id, uint8_t **addr, uint64_t *len);

// Copies `len` bytes at `offset` of the region `id` of the dataplane whose
// control socket is `control_socket` into `buf`: where a READ or
// BILATERAL SWAP landed. Returns 0, or `OAE_ERR_CONTROL` (no such region,
// out of bounds, no answer; see `oae_last_error`). It asks over the
// control socket, so it costs a round trip to the dataplane's control
// thread: read landed blocks in batches.
//
// # Safety
// `control_socket` is a NUL-terminated string; `buf` points to `len`
// writable bytes.
int oae_region_read(const char *control_socket,
                    uint16_t id,
                    uint32_t offset,
                    uint8_t *buf,
                    uint32_t len);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* OAE_H */
