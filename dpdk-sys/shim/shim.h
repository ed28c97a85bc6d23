/* The parts of DPDK's fast path that are static inline functions or
 * macros in its headers, as real functions Rust can call, one call per
 * burst. Every mbuf field access stays on this side, so the Rust code
 * never depends on rte_mbuf's layout (bitfields and unions that vary
 * between releases): it holds an oae_frame per mbuf instead. */
#ifndef OAE_DPDK_SHIM_H
#define OAE_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;

/* One single-segment frame as the Rust side holds it: the mbuf, where its
 * packet starts, its length and the room it may grow to. The length is
 * written into the mbuf only when the frame is transmitted, so reading or
 * writing a frame calls nothing. */
struct oae_frame {
	struct rte_mbuf *mbuf;
	uint8_t *data;
	uint16_t len;
	uint16_t room;
	/* A received mbuf that may carry an answer: direct, one segment, the
	 * only reference, from the pool named at receive. */
	uint8_t reusable;
};

/* A receive burst of at most n (<= 64) frames. Frames chained over
 * several mbufs are freed and counted in *chained. Returns how many
 * frames were kept. */
uint16_t oae_rx_frames(uint16_t port, uint16_t queue, const struct rte_mempool *pool,
		       struct oae_frame *frames, uint16_t n, uint16_t *chained);
/* Sets each frame's length in its mbuf (and clears what a receive left
 * in a reused one) and transmits them in order;
 * returns how many the PMD took (the first ones). n <= 64. */
uint16_t oae_tx_frames(uint16_t port, uint16_t queue, struct oae_frame *frames, uint16_t n);
/* n (<= 64) fresh frames, all or nothing: 0 on success. */
int oae_alloc_frames(struct rte_mempool *pool, struct oae_frame *frames, uint16_t n);
/* Frees n (<= 64) frames' mbufs in one call. */
void oae_free_frames(struct oae_frame *frames, uint16_t n);

/* Makes the calling thread one of the EAL's lcores, so that mempools keep
 * a cache for it (a thread that is none gets and puts every mbuf through
 * the pool's shared ring): 1 if it already was one, 0 if it is now, -1
 * with rte_errno set if it cannot be. */
int oae_thread_register(void);
/* Gives back the lcore oae_thread_register took. */
void oae_thread_unregister(void);

/* rte_errno of the calling thread. */
int oae_errno(void);

#endif
