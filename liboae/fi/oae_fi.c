/* liboae-fi: a libfabric provider ("oae") over a running oaed's host ring.
 *
 * An endpoint is a liboae queue on the dataplane's host ring: the program
 * needs no root and no NIC, as a host program beside an IPU. FI_EP_RDM with
 * FI_MSG and FI_TAGGED (SEND/RECV, tags matched here), FI_RMA (READ, WRITE
 * against the peer dataplane's registered regions) and FI_ATOMIC (FETCH-ADD,
 * SWAP, CAS on one 64-bit word). Progress is manual: reading a completion
 * queue moves everything. README.md says what is not supported and why.
 *
 * Messages land in receives this provider keeps posted in the dataplane (a
 * few per peer in the address vector, in a staging region it registers);
 * each is matched here against the application's receives, or kept as
 * unexpected until one is posted.
 */

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "oae.h"

#define OAE_FI_NAME "oae"
#define OAE_FI_VERSION FI_VERSION(0, 1)

/* A message's first byte says which kind it is; a tagged one's tag
 * follows. Every message leaves room for the longest header. */
#define KIND_MSG 1
#define KIND_TAGGED 2
#define HEADER 9
#define MAX_MSG (OAE_MAX_MESSAGE - HEADER)

#define MAX_PEERS 64
#define POOL_PER_PEER 4
#define POOL_SLOT 384
/* Blocks a READ lands in or a WRITE's bytes are taken from. */
#define MAX_BLOCKS 32
#define BLOCK_SLOT 960
#define BLOCKS_AT (MAX_PEERS * POOL_PER_PEER * POOL_SLOT)
#define STAGING_LEN (BLOCKS_AT + MAX_BLOCKS * BLOCK_SLOT)
#define DEFAULT_STAGING_REGION 65000
#define DEFAULT_RNR_RETRIES 100000
#define STAGING_KEY 0x0fab0fabu

#define TX_SIZE 64
#define RX_SIZE 256
#define CQ_DEFAULT 1024
/* A progress call takes at most this many completions off the ring; it
 * takes none while a bound queue has less room than that. */
#define RING_BATCH 16

/* Pool receives' work-request ids carry this bit; verbs' are op indices. */
#define POOL_WR (1ull << 63)

static struct fi_provider oae_prov;

static const uint64_t OAE_CAPS = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND |
				 FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
				 FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |
				 FI_REMOTE_COMM;

/* ---------------------------------------------------------------- objects */

struct oae_fabric {
	struct fid_fabric fabric;
};

struct oae_domain {
	struct fid_domain domain;
	char ring[256];
	char control[256];
	uint16_t staging;
	unsigned rnr_retries;
	bool yield;
	uint32_t api_version;
};

struct oae_ep;

struct oae_av {
	struct fid_av av;
	struct oae_ep *ep;
	uint64_t nodes[MAX_PEERS];
	bool live[MAX_PEERS];
	size_t count;
};

struct oae_cq {
	struct fid_cq cq;
	enum fi_cq_format format;
	struct oae_ep *ep;
	struct fi_cq_tagged_entry *entries;
	fi_addr_t *sources;
	size_t size, head, len;
	/* As many error entries as entries. */
	struct fi_cq_err_entry *errors;
	size_t err_head, err_len;
	uint32_t api_version;
};

struct oae_mr {
	struct fid_mr mr;
};

struct oae_eq {
	struct fid_eq eq;
};

/* An application's receive, waiting for its message. */
struct posted_recv {
	void *buf;
	size_t len;
	fi_addr_t src;
	uint64_t tag, ignore;
	bool tagged;
	void *context;
};

/* A message no receive was posted for yet. */
struct unexpected {
	struct unexpected *next;
	fi_addr_t src;
	bool tagged;
	uint64_t tag;
	bool has_data;
	uint32_t data;
	size_t len;
	uint8_t bytes[];
};

enum op_kind { OP_SEND, OP_WRITE, OP_READ, OP_ATOMIC };

/* A verb in flight, by the work-request id liboae carries. */
struct op {
	bool busy;
	enum op_kind kind;
	uint64_t cq_flags;
	void *context;
	bool completion;
	/* READ: where its bytes go, and its staging block. */
	void *buf;
	size_t len;
	int block;
	/* Fetching atomics: where the word before goes. */
	uint64_t *result;
	/* SEND: the message, kept to send again if the peer had no receive
	 * posted, and how many times it has been. */
	uint64_t node;
	uint8_t frame[OAE_MAX_MESSAGE];
	uint16_t frame_len;
	bool has_data;
	uint32_t data;
	unsigned refused;
	bool resend;
};

struct pool_slot {
	bool posted;
	fi_addr_t peer;
	uint8_t buf[POOL_SLOT];
};

struct oae_ep {
	struct fid_ep ep;
	struct oae_domain *domain;
	struct oae_queue *queue;
	/* Its region in the dataplane for messages and READs landing, and
	 * that region mapped here. */
	uint16_t staging;
	uint8_t *staging_map;
	uint64_t staging_len;
	uint64_t node;
	struct oae_av *av;
	struct oae_cq *tx_cq, *rx_cq;
	bool tx_selective, rx_selective;
	/* The capabilities the endpoint was opened with. */
	uint64_t caps;
	bool enabled;
	struct op ops[TX_SIZE];
	bool block_busy[MAX_BLOCKS];
	struct posted_recv recvs[RX_SIZE];
	size_t recv_count;
	struct unexpected *unexpected, **unexpected_tail;
	struct pool_slot pool[MAX_PEERS * POOL_PER_PEER];
	unsigned progress_calls;
	/* Times a SEND is sent again after its peer had no receive posted. */
	unsigned rnr_retries;
	size_t resends;
};

/* ------------------------------------------------------------ error codes */

/* The libfabric error for an OAE completion status (`OAE_WC_*`). */
static int fi_error(uint32_t status)
{
	switch (status) {
	case OAE_WC_REFUSED_NO_CREDIT: return FI_EAGAIN;
	case OAE_WC_REFUSED_UNKNOWN_REGION: return FI_EKEYREJECTED;
	case OAE_WC_REFUSED_BAD_KEY: return FI_EKEYREJECTED;
	case OAE_WC_REFUSED_OUT_OF_BOUNDS: return FI_EFAULT;
	case OAE_WC_REFUSED_MALFORMED: return FI_EINVAL;
	case OAE_WC_REFUSED_FORBIDDEN: return FI_EACCES;
	case OAE_WC_REFUSED_LOCKED: return FI_EBUSY;
	case OAE_WC_REFUSED_MISALIGNED: return FI_EINVAL;
	case OAE_WC_REFUSED_NO_RECEIVE: return FI_ENORX;
	case OAE_WC_REFUSED_RECEIVE_TOO_SMALL: return FI_ETRUNC;
	case OAE_WC_UNREACHABLE: return FI_EHOSTUNREACH;
	case OAE_WC_PEER_RESTARTED: return FI_ECONNRESET;
	case OAE_WC_ECHO_MISSING: return FI_EIO;
	case OAE_WC_ECHO_MISMATCH: return FI_EIO;
	case OAE_WC_LOCAL_LOCKED: return FI_EBUSY;
	case OAE_WC_TOO_LARGE: return FI_EMSGSIZE;
	case OAE_WC_QUEUE_FULL: return FI_EAGAIN;
	case OAE_WC_SHUTTING_DOWN: return FI_ESHUTDOWN;
	case OAE_WC_NOT_FOR_TRANSPORT: return FI_EOPNOTSUPP;
	case OAE_WC_UNDECODABLE: return FI_EIO;
	case OAE_WC_INVALID: return FI_EINVAL;
	case OAE_WC_NO_SUCH_LINK: return FI_EADDRNOTAVAIL;
	case OAE_WC_QP_FAILED: return FI_EIO;
	case OAE_WC_NO_ROUTE: return FI_EHOSTUNREACH;
	case OAE_WC_RECALLED: return FI_ECANCELED;
	default: return FI_EOTHER;
	}
}

/* ------------------------------------------------------- unsupported ops */

static int no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid; (void)bfid; (void)flags;
	return -FI_ENOSYS;
}

static int no_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)command; (void)arg;
	return -FI_ENOSYS;
}

static int no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		       void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static int no_tostr(const struct fid *fid, char *buf, size_t len)
{
	(void)fid; (void)buf; (void)len;
	return -FI_ENOSYS;
}

static int no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops,
		      void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static int close_and_free(struct fid *fid)
{
	free(fid);
	return 0;
}

#define FID_OPS(close_fn, bind_fn, control_fn)                                 \
	{                                                                      \
		.size = sizeof(struct fi_ops), .close = close_fn,              \
		.bind = bind_fn, .control = control_fn,                        \
		.ops_open = no_ops_open, .tostr = no_tostr,                    \
		.ops_set = no_ops_set,                                         \
	}

/* --------------------------------------------------------------- the CQ */

static void progress(struct oae_ep *ep);

/* Entries of either kind a queue can still take. Progress takes nothing
 * off the ring while a bound queue has less than RING_BATCH, so a
 * completion always has room when it is made. */
static size_t cq_room(const struct oae_cq *cq)
{
	if (!cq)
		return SIZE_MAX;
	size_t used = cq->len > cq->err_len ? cq->len : cq->err_len;
	return cq->size - used;
}

static void cq_push(struct oae_cq *cq, const struct fi_cq_tagged_entry *e, fi_addr_t src)
{
	if (cq->len == cq->size) {
		/* Progress keeps room: reaching this is a bug, said loudly. */
		FI_WARN(&oae_prov, FI_LOG_CQ, "completion queue overrun: a completion is lost\n");
		return;
	}
	size_t at = (cq->head + cq->len) % cq->size;
	cq->entries[at] = *e;
	cq->sources[at] = src;
	cq->len++;
}

static void cq_push_error(struct oae_cq *cq, const struct fi_cq_err_entry *e)
{
	if (cq->err_len == cq->size) {
		FI_WARN(&oae_prov, FI_LOG_CQ, "error completions overrun: one is lost\n");
		return;
	}
	cq->errors[(cq->err_head + cq->err_len) % cq->size] = *e;
	cq->err_len++;
}

static size_t entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT: return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	default: return sizeof(struct fi_cq_tagged_entry);
	}
}

static ssize_t cq_readfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src)
{
	struct oae_cq *cq = (struct oae_cq *)fid;
	if (cq->ep)
		progress(cq->ep);
	if (cq->len == 0) {
		if (cq->err_len)
			return -FI_EAVAIL;
		/* Sharing a CPU with a dataplane, a program that finds nothing
		 * lets it run: the completion it waits for needs it. */
		if (cq->ep && cq->ep->domain->yield)
			sched_yield();
		return -FI_EAGAIN;
	}
	size_t n = 0, size = entry_size(cq->format);
	/* The formats share their leading fields: copy each entry's prefix. */
	while (n < count && cq->len > 0) {
		memcpy((uint8_t *)buf + n * size, &cq->entries[cq->head], size);
		if (src)
			src[n] = cq->sources[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->len--;
		n++;
	}
	return (ssize_t)n;
}

static ssize_t cq_read(struct fid_cq *fid, void *buf, size_t count)
{
	return cq_readfrom(fid, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *fid, struct fi_cq_err_entry *buf, uint64_t flags)
{
	(void)flags;
	struct oae_cq *cq = (struct oae_cq *)fid;
	if (cq->err_len == 0)
		return -FI_EAGAIN;
	struct fi_cq_err_entry e = cq->errors[cq->err_head];
	cq->err_head = (cq->err_head + 1) % cq->size;
	cq->err_len--;
	if (FI_VERSION_LT(cq->api_version, FI_VERSION(1, 5))) {
		/* Before 1.5 the entry ends at err_data. */
		memcpy(buf, &e, offsetof(struct fi_cq_err_entry, err_data_size));
		return 1;
	}
	/* No provider data: a buffer the caller lends stays unused. */
	void *lent = buf->err_data_size ? buf->err_data : NULL;
	*buf = e;
	buf->err_data = lent;
	buf->err_data_size = 0;
	return 1;
}

static ssize_t cq_sreadfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src,
			    const void *cond, int timeout)
{
	(void)cond;
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		ssize_t n = cq_readfrom(fid, buf, count, src);
		if (n != -FI_EAGAIN)
			return n;
		if (timeout >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			long ms = (now.tv_sec - start.tv_sec) * 1000 +
				  (now.tv_nsec - start.tv_nsec) / 1000000;
			if (ms >= timeout)
				return -FI_EAGAIN;
		}
	}
}

static ssize_t cq_sread(struct fid_cq *fid, void *buf, size_t count, const void *cond,
			int timeout)
{
	return cq_sreadfrom(fid, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *fid)
{
	(void)fid;
	return -FI_ENOSYS;
}

static const char *cq_strerror(struct fid_cq *fid, int prov_errno, const void *err_data,
			       char *buf, size_t len)
{
	(void)fid; (void)err_data;
	const char *text = oae_strerror(prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", text);
		return buf;
	}
	return text;
}

static int cq_close(struct fid *fid)
{
	struct oae_cq *cq = (struct oae_cq *)fid;
	if (cq->ep)
		return -FI_EBUSY;
	free(cq->entries);
	free(cq->sources);
	free(cq->errors);
	free(cq);
	return 0;
}

static struct fi_ops cq_fid_ops = FID_OPS(cq_close, no_bind, no_control);

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

static int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **out,
		   void *context)
{
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS;
	struct oae_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	cq->size = attr->size ? attr->size : CQ_DEFAULT;
	if (cq->size < 2 * RING_BATCH)
		cq->size = 2 * RING_BATCH;
	cq->entries = calloc(cq->size, sizeof(*cq->entries));
	cq->sources = calloc(cq->size, sizeof(*cq->sources));
	cq->errors = calloc(cq->size, sizeof(*cq->errors));
	if (!cq->entries || !cq->sources || !cq->errors) {
		free(cq->entries);
		free(cq->sources);
		free(cq->errors);
		free(cq);
		return -FI_ENOMEM;
	}
	cq->api_version = ((struct oae_domain *)domain)->api_version;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cq_fid_ops;
	cq->cq.ops = &cq_ops;
	*out = &cq->cq;
	return 0;
}

/* --------------------------------------------------------- completions */

static void complete_ok(struct oae_cq *cq, void *context, uint64_t flags, size_t len, void *buf,
			uint64_t data, uint64_t tag, fi_addr_t src)
{
	if (!cq)
		return;
	struct fi_cq_tagged_entry e = {
		.op_context = context, .flags = flags, .len = len,
		.buf = buf, .data = data, .tag = tag,
	};
	cq_push(cq, &e, src);
}

static void complete_error(struct oae_cq *cq, const struct fi_cq_err_entry *e)
{
	if (!cq) {
		FI_WARN(&oae_prov, FI_LOG_CQ, "an error completion (%s) has no queue to go to\n",
			fi_strerror(e->err));
		return;
	}
	cq_push_error(cq, e);
}

static void complete_failed(struct oae_cq *cq, void *context, uint64_t flags, int err,
			    int prov_errno, size_t len, size_t olen)
{
	struct fi_cq_err_entry e = {
		.op_context = context, .flags = flags, .len = len,
		.olen = olen, .err = err, .prov_errno = prov_errno,
	};
	complete_error(cq, &e);
}

/* ------------------------------------------------------------ receives */

static bool src_matches(fi_addr_t want, fi_addr_t src)
{
	return want == FI_ADDR_UNSPEC || want == src;
}

/* Delivers a message into a posted receive: its bytes, or truncation. */
static void deliver(struct oae_ep *ep, const struct posted_recv *r, const uint8_t *bytes,
		    size_t len, bool has_data, uint32_t data, uint64_t tag, fi_addr_t src)
{
	uint64_t flags = FI_RECV | (r->tagged ? FI_TAGGED : FI_MSG) |
			 (has_data ? FI_REMOTE_CQ_DATA : 0);
	if (len > r->len) {
		memcpy(r->buf, bytes, r->len);
		struct fi_cq_err_entry e = {
			.op_context = r->context, .flags = flags, .len = r->len,
			.buf = r->buf, .data = has_data ? data : 0, .tag = tag,
			.olen = len - r->len, .err = FI_ETRUNC,
		};
		complete_error(ep->rx_cq, &e);
		return;
	}
	if (len)
		memcpy(r->buf, bytes, len);
	complete_ok(ep->rx_cq, r->context, flags, len, r->buf, has_data ? data : 0, tag, src);
}

static bool recv_matches(const struct posted_recv *r, bool tagged, uint64_t tag, fi_addr_t src)
{
	if (r->tagged != tagged || !src_matches(r->src, src))
		return false;
	return !tagged || ((r->tag ^ tag) & ~r->ignore) == 0;
}

/* A pool receive's message: to the first matching receive, or kept. */
static void on_message(struct oae_ep *ep, struct pool_slot *slot, const struct oae_wc *wc)
{
	const uint8_t *m = slot->buf;
	/* The dataplane fills a receive no further than its length. */
	size_t len = wc->len < OAE_MAX_MESSAGE ? wc->len : OAE_MAX_MESSAGE;
	bool has_data = wc->wc_flags & OAE_WC_WITH_IMM;
	if (len < 1 || (m[0] != KIND_MSG && m[0] != KIND_TAGGED) ||
	    (m[0] == KIND_TAGGED && len < HEADER)) {
		FI_WARN(&oae_prov, FI_LOG_EP_DATA,
			"a message of %zu bytes from peer %lu is not this provider's: dropped\n",
			len, (unsigned long)slot->peer);
		return;
	}
	bool tagged = m[0] == KIND_TAGGED;
	uint64_t tag = 0;
	size_t at = 1;
	if (tagged) {
		memcpy(&tag, m + 1, 8);
		at = HEADER;
	}
	for (size_t i = 0; i < ep->recv_count; i++) {
		struct posted_recv r = ep->recvs[i];
		if (!recv_matches(&r, tagged, tag, slot->peer))
			continue;
		memmove(&ep->recvs[i], &ep->recvs[i + 1],
			(ep->recv_count - i - 1) * sizeof(r));
		ep->recv_count--;
		deliver(ep, &r, m + at, len - at, has_data, wc->imm_data, tag, slot->peer);
		return;
	}
	struct unexpected *u = malloc(sizeof(*u) + len - at);
	if (!u) {
		FI_WARN(&oae_prov, FI_LOG_EP_DATA, "no memory to keep an unexpected message\n");
		return;
	}
	*u = (struct unexpected){
		.src = slot->peer, .tagged = tagged, .tag = tag,
		.has_data = has_data, .data = wc->imm_data, .len = len - at,
	};
	memcpy(u->bytes, m + at, len - at);
	*ep->unexpected_tail = u;
	ep->unexpected_tail = &u->next;
}

static int slot_index(struct oae_ep *ep, struct pool_slot *slot)
{
	return (int)(slot - ep->pool);
}

static void post_pool_slot(struct oae_ep *ep, struct pool_slot *slot)
{
	uint64_t node = ep->av->nodes[slot->peer];
	int i = slot_index(ep, slot);
	if (oae_queue_to_node(ep->queue, node) != 0)
		return;
	int rc = oae_post_recv(ep->queue, POOL_WR | (uint64_t)i, ep->staging,
			       (uint32_t)(i * POOL_SLOT), slot->buf, OAE_MAX_MESSAGE);
	if (rc == 0)
		slot->posted = true;
}

/* Keeps every peer's pool receives posted. */
static void repost_pool(struct oae_ep *ep)
{
	if (!ep->av || !ep->enabled)
		return;
	for (size_t p = 0; p < ep->av->count; p++) {
		if (!ep->av->live[p])
			continue;
		for (int k = 0; k < POOL_PER_PEER; k++) {
			struct pool_slot *slot = &ep->pool[p * POOL_PER_PEER + k];
			slot->peer = p;
			if (!slot->posted)
				post_pool_slot(ep, slot);
		}
	}
}

static void on_pool_completion(struct oae_ep *ep, const struct oae_wc *wc)
{
	uint64_t i = wc->wr_id & ~POOL_WR;
	if (i >= MAX_PEERS * POOL_PER_PEER)
		return;
	struct pool_slot *slot = &ep->pool[i];
	slot->posted = false;
	if (wc->status != OAE_WC_SUCCESS) {
		/* Posted again at a later progress; the dataplane said why. */
		FI_WARN(&oae_prov, FI_LOG_EP_DATA, "a receive from peer %lu was refused: %s\n",
			(unsigned long)slot->peer, oae_strerror((int)wc->status));
		return;
	}
	on_message(ep, slot, wc);
	post_pool_slot(ep, slot);
}

/* ---------------------------------------------------------- verbs' ops */

static struct op *op_alloc(struct oae_ep *ep, uint64_t *index)
{
	for (uint64_t i = 0; i < TX_SIZE; i++) {
		if (!ep->ops[i].busy) {
			ep->ops[i] = (struct op){ .busy = true, .block = -1 };
			*index = i;
			return &ep->ops[i];
		}
	}
	return NULL;
}

static void op_free(struct oae_ep *ep, struct op *op)
{
	if (op->block >= 0)
		ep->block_busy[op->block] = false;
	if (op->resend)
		ep->resends--;
	op->busy = false;
	op->resend = false;
}

static void on_verb_completion(struct oae_ep *ep, const struct oae_wc *wc)
{
	if (wc->wr_id >= TX_SIZE || !ep->ops[wc->wr_id].busy)
		return;
	struct op *op = &ep->ops[wc->wr_id];
	int status = (int)wc->status;
	if (status == OAE_WC_REFUSED_NO_RECEIVE && op->kind == OP_SEND &&
	    op->refused < ep->rnr_retries) {
		/* The peer's provider posts receives as it progresses: the
		 * message goes again at this side's next progress, no timer. */
		op->refused++;
		op->resend = true;
		ep->resends++;
		return;
	}
	if (status == OAE_WC_SUCCESS && op->kind == OP_READ) {
		/* The bytes landed in the staging region, mapped here. */
		memcpy(op->buf, ep->staging_map + BLOCKS_AT + (size_t)op->block * BLOCK_SLOT,
		       op->len);
	}
	if (status == OAE_WC_SUCCESS && op->result)
		*op->result = wc->old;
	if (status != OAE_WC_SUCCESS)
		complete_failed(ep->tx_cq, op->context, op->cq_flags, fi_error(wc->status),
				status, 0, 0);
	else if (op->completion)
		complete_ok(ep->tx_cq, op->context, op->cq_flags, 0, NULL, 0, 0,
			    FI_ADDR_NOTAVAIL);
	op_free(ep, op);
}

static void resend(struct oae_ep *ep)
{
	for (uint64_t i = 0; i < TX_SIZE && ep->resends; i++) {
		struct op *op = &ep->ops[i];
		if (!op->busy || !op->resend)
			continue;
		int rc = oae_queue_to_node(ep->queue, op->node);
		if (rc == 0)
			rc = oae_post_send(ep->queue, i, op->frame, op->frame_len,
					   op->has_data ? OAE_SEND_WITH_IMM : 0, op->data);
		if (rc == OAE_ERR_AGAIN)
			return;
		if (rc != 0) {
			FI_WARN(&oae_prov, FI_LOG_EP_DATA, "%s\n", oae_last_error());
			complete_failed(ep->tx_cq, op->context, op->cq_flags, FI_EINVAL, rc, 0, 0);
			op_free(ep, op);
			continue;
		}
		op->resend = false;
		ep->resends--;
	}
}

static void progress(struct oae_ep *ep)
{
	if (!ep->enabled)
		return;
	resend(ep);
	/* Refused pool receives are posted again now and then, not every call. */
	if ((ep->progress_calls++ & 1023) == 0)
		repost_pool(ep);
	struct oae_wc wc[RING_BATCH];
	for (;;) {
		if (cq_room(ep->tx_cq) < RING_BATCH || cq_room(ep->rx_cq) < RING_BATCH)
			break;
		int n = oae_poll_cq(ep->queue, RING_BATCH, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].opcode == OAE_OP_RECV && (wc[i].wr_id & POOL_WR))
				on_pool_completion(ep, &wc[i]);
			else
				on_verb_completion(ep, &wc[i]);
		}
		if (n < RING_BATCH)
			break;
	}
}

/* The node an address-vector entry names. */
static int peer_node(struct oae_ep *ep, fi_addr_t addr, uint64_t *node)
{
	if (!ep->av || addr >= ep->av->count || !ep->av->live[addr])
		return -FI_EINVAL;
	*node = ep->av->nodes[addr];
	return 0;
}

/* Posts a verb to `addr` through `post`, with an op that completes it. */
static ssize_t start_op(struct oae_ep *ep, fi_addr_t addr, enum op_kind kind, uint64_t cq_flags,
			void *context, uint64_t flags, struct op **out, uint64_t *index)
{
	uint64_t node;
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	int rc = peer_node(ep, addr, &node);
	if (rc)
		return rc;
	struct op *op = op_alloc(ep, index);
	if (!op) {
		progress(ep);
		return -FI_EAGAIN;
	}
	op->kind = kind;
	op->cq_flags = cq_flags;
	op->context = context;
	op->completion = !ep->tx_selective || (flags & FI_COMPLETION);
	op->node = node;
	if (oae_queue_to_node(ep->queue, node) != 0) {
		op_free(ep, op);
		return -FI_EINVAL;
	}
	*out = op;
	return 0;
}

/* What a liboae post returned, as libfabric says it. */
static ssize_t posted(struct oae_ep *ep, struct op *op, int rc)
{
	if (rc == 0)
		return 0;
	op_free(ep, op);
	if (rc == OAE_ERR_AGAIN) {
		progress(ep);
		return -FI_EAGAIN;
	}
	FI_WARN(&oae_prov, FI_LOG_EP_DATA, "%s\n", oae_last_error());
	return -FI_EINVAL;
}

/* ------------------------------------------------------------- messages */

static ssize_t send_message(struct oae_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			    bool tagged, uint64_t tag, bool has_data, uint64_t data,
			    void *context, uint64_t flags)
{
	if (len > MAX_MSG)
		return -FI_EMSGSIZE;
	struct op *op;
	uint64_t index;
	uint64_t cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	ssize_t rc = start_op(ep, dest, OP_SEND, cq_flags, context, flags, &op, &index);
	if (rc)
		return rc;
	op->frame[0] = tagged ? KIND_TAGGED : KIND_MSG;
	size_t at = 1;
	if (tagged) {
		memcpy(op->frame + 1, &tag, 8);
		at = HEADER;
	}
	if (len)
		memcpy(op->frame + at, buf, len);
	op->frame_len = (uint16_t)(at + len);
	op->has_data = has_data;
	op->data = (uint32_t)data;
	return posted(ep, op,
		      oae_post_send(ep->queue, index, op->frame, op->frame_len,
				    has_data ? OAE_SEND_WITH_IMM : 0, op->data));
}

static ssize_t post_recv(struct oae_ep *ep, void *buf, size_t len, fi_addr_t src,
			 bool tagged, uint64_t tag, uint64_t ignore, void *context)
{
	struct posted_recv r = {
		.buf = buf, .len = len,
		.src = ep->caps & FI_DIRECTED_RECV ? src : FI_ADDR_UNSPEC,
		.tag = tag, .ignore = ignore, .tagged = tagged, .context = context,
	};
	progress(ep);
	if (cq_room(ep->rx_cq) == 0)
		return -FI_EAGAIN;
	for (struct unexpected **u = &ep->unexpected; *u; u = &(*u)->next) {
		struct unexpected *m = *u;
		if (!recv_matches(&r, m->tagged, m->tag, m->src))
			continue;
		*u = m->next;
		if (ep->unexpected_tail == &m->next)
			ep->unexpected_tail = u;
		deliver(ep, &r, m->bytes, m->len, m->has_data, m->data, m->tag, m->src);
		free(m);
		return 0;
	}
	if (ep->recv_count == RX_SIZE)
		return -FI_EAGAIN;
	ep->recvs[ep->recv_count++] = r;
	return 0;
}

static ssize_t msg_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src,
			void *context)
{
	(void)desc;
	return post_recv((struct oae_ep *)fid, buf, len, src, false, 0, 0, context);
}

static ssize_t msg_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t src, void *context)
{
	(void)desc;
	if (count > 1)
		return -FI_EINVAL;
	return msg_recv(fid, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL,
			src, context);
}

static ssize_t msg_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (flags & (FI_PEEK | FI_CLAIM | FI_DISCARD))
		return -FI_EOPNOTSUPP;
	return msg_recvv(fid, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->context);
}

static ssize_t msg_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
			fi_addr_t dest, void *context)
{
	(void)desc;
	return send_message((struct oae_ep *)fid, buf, len, dest, false, 0, false, 0, context, 0);
}

static ssize_t msg_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, void *context)
{
	(void)desc;
	return send_message((struct oae_ep *)fid, buf, len, dest, false, 0, true, data, context,
			    0);
}

static ssize_t msg_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dest, void *context)
{
	(void)desc;
	if (count > 1)
		return -FI_EINVAL;
	return msg_send(fid, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL,
			dest, context);
}

static ssize_t msg_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (msg->iov_count > 1)
		return -FI_EINVAL;
	/* The bytes are copied onto the host ring before this returns, so
	 * FI_INJECT's promise holds for every send; a completion still comes. */
	return send_message((struct oae_ep *)fid,
			    msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
			    msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr, false, 0,
			    flags & FI_REMOTE_CQ_DATA, msg->data, msg->context, flags);
}

static ssize_t no_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest)
{
	(void)fid; (void)buf; (void)len; (void)dest;
	return -FI_ENOSYS;
}

static ssize_t no_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data,
			     fi_addr_t dest)
{
	(void)fid; (void)buf; (void)len; (void)data; (void)dest;
	return -FI_ENOSYS;
}

static struct fi_ops_msg msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = msg_recv,
	.recvv = msg_recvv,
	.recvmsg = msg_recvmsg,
	.send = msg_send,
	.sendv = msg_sendv,
	.sendmsg = msg_sendmsg,
	.inject = no_inject,
	.senddata = msg_senddata,
	.injectdata = no_injectdata,
};

/* --------------------------------------------------------------- tagged */

static ssize_t tag_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src,
			uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return post_recv((struct oae_ep *)fid, buf, len, src, true, tag, ignore, context);
}

static ssize_t tag_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	if (count > 1)
		return -FI_EINVAL;
	return tag_recv(fid, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL,
			src, tag, ignore, context);
}

static ssize_t tag_recvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (flags & (FI_PEEK | FI_CLAIM | FI_DISCARD))
		return -FI_EOPNOTSUPP;
	return tag_recvv(fid, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->tag,
			 msg->ignore, msg->context);
}

static ssize_t tag_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
			fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return send_message((struct oae_ep *)fid, buf, len, dest, true, tag, false, 0, context, 0);
}

static ssize_t tag_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return send_message((struct oae_ep *)fid, buf, len, dest, true, tag, true, data, context,
			    0);
}

static ssize_t tag_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	if (count > 1)
		return -FI_EINVAL;
	return tag_send(fid, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL,
			dest, tag, context);
}

static ssize_t tag_sendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (msg->iov_count > 1)
		return -FI_EINVAL;
	return send_message((struct oae_ep *)fid,
			    msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
			    msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr, true,
			    msg->tag, flags & FI_REMOTE_CQ_DATA, msg->data, msg->context, flags);
}

static ssize_t no_tag_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest,
			     uint64_t tag)
{
	(void)fid; (void)buf; (void)len; (void)dest; (void)tag;
	return -FI_ENOSYS;
}

static ssize_t no_tag_injectdata(struct fid_ep *fid, const void *buf, size_t len,
				 uint64_t data, fi_addr_t dest, uint64_t tag)
{
	(void)fid; (void)buf; (void)len; (void)data; (void)dest; (void)tag;
	return -FI_ENOSYS;
}

static struct fi_ops_tagged tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = tag_recv,
	.recvv = tag_recvv,
	.recvmsg = tag_recvmsg,
	.send = tag_send,
	.sendv = tag_sendv,
	.sendmsg = tag_sendmsg,
	.inject = no_tag_inject,
	.senddata = tag_senddata,
	.injectdata = no_tag_injectdata,
};

/* ------------------------------------------------------------------ RMA */

/* A remote key names a region of the peer's dataplane: its id in the
 * high 32 bits, its key in the low; `addr` is an offset in it. */
static uint16_t key_region(uint64_t key) { return (uint16_t)(key >> 32); }
static uint32_t key_key(uint64_t key) { return (uint32_t)key; }

/* A free staging block for `op`, or -1. */
static int take_block(struct oae_ep *ep, struct op *op)
{
	for (int i = 0; i < MAX_BLOCKS; i++) {
		if (!ep->block_busy[i]) {
			ep->block_busy[i] = true;
			op->block = i;
			return i;
		}
	}
	return -1;
}

/* Starts an RMA op on a staging block: its op, index and block's offset. */
static ssize_t start_block_op(struct oae_ep *ep, fi_addr_t peer, size_t len, uint64_t addr,
			      enum op_kind kind, uint64_t cq_flags, void *context,
			      uint64_t flags, struct op **op, uint64_t *index, uint32_t *at)
{
	if (len > OAE_MAX_BLOCK || addr > UINT32_MAX)
		return -FI_EMSGSIZE;
	ssize_t rc = start_op(ep, peer, kind, cq_flags, context, flags, op, index);
	if (rc)
		return rc;
	int block = take_block(ep, *op);
	if (block < 0) {
		op_free(ep, *op);
		progress(ep);
		return -FI_EAGAIN;
	}
	*at = BLOCKS_AT + (uint32_t)block * BLOCK_SLOT;
	return 0;
}

static ssize_t read_flagged(struct fid_ep *fid, void *buf, size_t len, fi_addr_t src,
			    uint64_t addr, uint64_t key, void *context, uint64_t flags)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	struct op *op;
	uint64_t index;
	uint32_t at;
	ssize_t rc = start_block_op(ep, src, len, addr, OP_READ, FI_RMA | FI_READ, context, flags,
				    &op, &index, &at);
	if (rc)
		return rc;
	op->buf = buf;
	op->len = len;
	return posted(ep, op,
		      oae_post_read(ep->queue, index, key_region(key), key_key(key), (uint32_t)addr,
				    ep->staging, at, (uint16_t)len));
}

static ssize_t rma_read(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src,
			uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	return read_flagged(fid, buf, len, src, addr, key, context, 0);
}

static ssize_t write_flagged(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest,
			     uint64_t addr, uint64_t key, void *context, uint64_t flags)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	struct op *op;
	uint64_t index;
	uint32_t at;
	ssize_t rc = start_block_op(ep, dest, len, addr, OP_WRITE, FI_RMA | FI_WRITE, context,
				    flags, &op, &index, &at);
	if (rc)
		return rc;
	/* The bytes go into a staging block (mapped here) and the dataplane
	 * takes them from there: no copy through the host ring. */
	if (len)
		memcpy(ep->staging_map + at, buf, len);
	return posted(ep, op,
		      oae_post_write_local(ep->queue, index, key_region(key), key_key(key),
					   (uint32_t)addr, ep->staging, at, (uint16_t)len));
}

static ssize_t rma_write(struct fid_ep *fid, const void *buf, size_t len, void *desc,
			 fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	return write_flagged(fid, buf, len, dest, addr, key, context, 0);
}

static ssize_t rma_readv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	if (count != 1)
		return -FI_EINVAL;
	return rma_read(fid, iov[0].iov_base, iov[0].iov_len, NULL, src, addr, key, context);
}

static ssize_t rma_readmsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags)
{
	if (msg->iov_count != 1 || msg->rma_iov_count != 1)
		return -FI_EINVAL;
	return read_flagged(fid, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, msg->addr,
			    msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context, flags);
}

static ssize_t rma_writev(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
			  fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	if (count != 1)
		return -FI_EINVAL;
	return rma_write(fid, iov[0].iov_base, iov[0].iov_len, NULL, dest, addr, key, context);
}

static ssize_t rma_writemsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags)
{
	if (msg->iov_count != 1 || msg->rma_iov_count != 1)
		return -FI_EINVAL;
	if (flags & FI_REMOTE_CQ_DATA)
		return -FI_EOPNOTSUPP;
	return write_flagged(fid, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, msg->addr,
			     msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context, flags);
}

static ssize_t no_rma_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest,
			     uint64_t addr, uint64_t key)
{
	(void)fid; (void)buf; (void)len; (void)dest; (void)addr; (void)key;
	return -FI_ENOSYS;
}

static ssize_t no_writedata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
			    void *context)
{
	(void)fid; (void)buf; (void)len; (void)desc; (void)data; (void)dest; (void)addr;
	(void)key; (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_rma_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data,
				 fi_addr_t dest, uint64_t addr, uint64_t key)
{
	(void)fid; (void)buf; (void)len; (void)data; (void)dest; (void)addr; (void)key;
	return -FI_ENOSYS;
}

static struct fi_ops_rma rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = rma_read,
	.readv = rma_readv,
	.readmsg = rma_readmsg,
	.write = rma_write,
	.writev = rma_writev,
	.writemsg = rma_writemsg,
	.inject = no_rma_inject,
	.writedata = no_writedata,
	.injectdata = no_rma_injectdata,
};

/* --------------------------------------------------------------- atomics */

static bool is_word(enum fi_datatype datatype, size_t count)
{
	return (datatype == FI_UINT64 || datatype == FI_INT64) && count == 1;
}

/* Where an atomic goes, and with which libfabric flags. */
struct atomic_target {
	fi_addr_t dest;
	uint64_t addr, key;
	void *context;
	uint64_t flags;
};

static ssize_t atomic_post(struct oae_ep *ep, enum fi_op fop, uint64_t operand,
			   uint64_t compare, uint64_t *result, struct atomic_target t,
			   uint64_t cq_flags)
{
	if (t.addr > UINT32_MAX)
		return -FI_EINVAL;
	struct op *op;
	uint64_t index;
	ssize_t rc = start_op(ep, t.dest, OP_ATOMIC, cq_flags, t.context, t.flags, &op, &index);
	if (rc)
		return rc;
	op->result = result;
	uint16_t region = key_region(t.key);
	uint32_t rkey = key_key(t.key), offset = (uint32_t)t.addr;
	switch (fop) {
	case FI_SUM:
		rc = oae_post_faa(ep->queue, index, region, rkey, offset, operand);
		break;
	case FI_ATOMIC_READ:
		/* Adding nothing reads the word atomically, its value inline. */
		rc = oae_post_faa(ep->queue, index, region, rkey, offset, 0);
		break;
	case FI_ATOMIC_WRITE:
		rc = oae_post_swap(ep->queue, index, region, rkey, offset, operand);
		break;
	case FI_CSWAP:
		rc = oae_post_cas(ep->queue, index, region, rkey, offset, compare, operand);
		break;
	default:
		op_free(ep, op);
		return -FI_EOPNOTSUPP;
	}
	return posted(ep, op, (int)rc);
}

static ssize_t atomic_write(struct fid_ep *fid, const void *buf, size_t count, void *desc,
			    fi_addr_t dest, uint64_t addr, uint64_t key,
			    enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)desc;
	if (!is_word(datatype, count) || (op != FI_SUM && op != FI_ATOMIC_WRITE))
		return -FI_EOPNOTSUPP;
	struct atomic_target t = { dest, addr, key, context, 0 };
	return atomic_post((struct oae_ep *)fid, op, *(const uint64_t *)buf, 0, NULL, t,
			   FI_ATOMIC | FI_WRITE);
}

static ssize_t atomic_readwrite(struct fid_ep *fid, const void *buf, size_t count, void *desc,
				void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
				uint64_t key, enum fi_datatype datatype, enum fi_op op,
				void *context)
{
	(void)desc; (void)result_desc;
	if (!is_word(datatype, count) ||
	    (op != FI_SUM && op != FI_ATOMIC_WRITE && op != FI_ATOMIC_READ))
		return -FI_EOPNOTSUPP;
	uint64_t operand = op == FI_ATOMIC_READ ? 0 : *(const uint64_t *)buf;
	struct atomic_target t = { dest, addr, key, context, 0 };
	return atomic_post((struct oae_ep *)fid, op, operand, 0, result, t, FI_ATOMIC | FI_READ);
}

static ssize_t atomic_compwrite(struct fid_ep *fid, const void *buf, size_t count, void *desc,
				const void *compare, void *compare_desc, void *result,
				void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)desc; (void)compare_desc; (void)result_desc;
	if (!is_word(datatype, count) || op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	struct atomic_target t = { dest, addr, key, context, 0 };
	return atomic_post((struct oae_ep *)fid, op, *(const uint64_t *)buf,
			   *(const uint64_t *)compare, result, t, FI_ATOMIC | FI_READ);
}

static ssize_t no_atomic_writev(struct fid_ep *fid, const struct fi_ioc *iov, void **desc,
				size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)desc;
	if (count != 1)
		return -FI_EINVAL;
	return atomic_write(fid, iov[0].addr, iov[0].count, NULL, dest, addr, key, datatype, op,
			    context);
}

static ssize_t atomic_writemsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
			       uint64_t flags)
{
	if (msg->iov_count != 1 || msg->rma_iov_count != 1)
		return -FI_EINVAL;
	if (!is_word(msg->datatype, msg->msg_iov[0].count) ||
	    (msg->op != FI_SUM && msg->op != FI_ATOMIC_WRITE))
		return -FI_EOPNOTSUPP;
	struct atomic_target t = { msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key,
				   msg->context, flags };
	return atomic_post((struct oae_ep *)fid, msg->op, *(const uint64_t *)msg->msg_iov[0].addr,
			   0, NULL, t, FI_ATOMIC | FI_WRITE);
}

static ssize_t no_atomic_inject(struct fid_ep *fid, const void *buf, size_t count,
				fi_addr_t dest, uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op)
{
	(void)fid; (void)buf; (void)count; (void)dest; (void)addr; (void)key; (void)datatype;
	(void)op;
	return -FI_ENOSYS;
}

static ssize_t atomic_readwritev(struct fid_ep *fid, const struct fi_ioc *iov, void **desc,
				 size_t count, struct fi_ioc *resultv, void **result_desc,
				 size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
				 enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)desc; (void)result_desc;
	if (count != 1 || result_count != 1)
		return -FI_EINVAL;
	return atomic_readwrite(fid, iov[0].addr, iov[0].count, NULL, resultv[0].addr, NULL, dest,
				addr, key, datatype, op, context);
}

static ssize_t atomic_readwritemsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
				   struct fi_ioc *resultv, void **result_desc,
				   size_t result_count, uint64_t flags)
{
	(void)result_desc;
	if (msg->iov_count != 1 || msg->rma_iov_count != 1 || result_count != 1)
		return -FI_EINVAL;
	if (!is_word(msg->datatype, msg->msg_iov[0].count) ||
	    (msg->op != FI_SUM && msg->op != FI_ATOMIC_WRITE && msg->op != FI_ATOMIC_READ))
		return -FI_EOPNOTSUPP;
	uint64_t operand =
		msg->op == FI_ATOMIC_READ ? 0 : *(const uint64_t *)msg->msg_iov[0].addr;
	struct atomic_target t = { msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key,
				   msg->context, flags };
	return atomic_post((struct oae_ep *)fid, msg->op, operand, 0, resultv[0].addr, t,
			   FI_ATOMIC | FI_READ);
}

static ssize_t atomic_compwritev(struct fid_ep *fid, const struct fi_ioc *iov, void **desc,
				 size_t count, const struct fi_ioc *comparev, void **compare_desc,
				 size_t compare_count, struct fi_ioc *resultv, void **result_desc,
				 size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
				 enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)desc; (void)compare_desc; (void)result_desc;
	if (count != 1 || compare_count != 1 || result_count != 1)
		return -FI_EINVAL;
	return atomic_compwrite(fid, iov[0].addr, iov[0].count, NULL, comparev[0].addr, NULL,
				resultv[0].addr, NULL, dest, addr, key, datatype, op, context);
}

static ssize_t atomic_compwritemsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
				   const struct fi_ioc *comparev, void **compare_desc,
				   size_t compare_count, struct fi_ioc *resultv,
				   void **result_desc, size_t result_count, uint64_t flags)
{
	(void)compare_desc; (void)result_desc;
	if (msg->iov_count != 1 || msg->rma_iov_count != 1 || compare_count != 1 ||
	    result_count != 1)
		return -FI_EINVAL;
	if (!is_word(msg->datatype, msg->msg_iov[0].count) || msg->op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	struct atomic_target t = { msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key,
				   msg->context, flags };
	return atomic_post((struct oae_ep *)fid, msg->op, *(const uint64_t *)msg->msg_iov[0].addr,
			   *(const uint64_t *)comparev[0].addr, resultv[0].addr, t,
			   FI_ATOMIC | FI_READ);
}

static int valid_count(enum fi_datatype datatype, bool supported, size_t *count)
{
	if ((datatype != FI_UINT64 && datatype != FI_INT64) || !supported)
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}

static int atomic_writevalid(struct fid_ep *fid, enum fi_datatype datatype, enum fi_op op,
			     size_t *count)
{
	(void)fid;
	return valid_count(datatype, op == FI_SUM || op == FI_ATOMIC_WRITE, count);
}

static int atomic_readwritevalid(struct fid_ep *fid, enum fi_datatype datatype, enum fi_op op,
				 size_t *count)
{
	(void)fid;
	return valid_count(datatype,
			   op == FI_SUM || op == FI_ATOMIC_WRITE || op == FI_ATOMIC_READ, count);
}

static int atomic_compwritevalid(struct fid_ep *fid, enum fi_datatype datatype, enum fi_op op,
				 size_t *count)
{
	(void)fid;
	return valid_count(datatype, op == FI_CSWAP, count);
}

static struct fi_ops_atomic atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = atomic_write,
	.writev = no_atomic_writev,
	.writemsg = atomic_writemsg,
	.inject = no_atomic_inject,
	.readwrite = atomic_readwrite,
	.readwritev = atomic_readwritev,
	.readwritemsg = atomic_readwritemsg,
	.compwrite = atomic_compwrite,
	.compwritev = atomic_compwritev,
	.compwritemsg = atomic_compwritemsg,
	.writevalid = atomic_writevalid,
	.readwritevalid = atomic_readwritevalid,
	.compwritevalid = atomic_compwritevalid,
};

/* ------------------------------------------------------------- endpoint */

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	for (size_t i = 0; i < ep->recv_count; i++) {
		struct posted_recv r = ep->recvs[i];
		if (r.context != context)
			continue;
		if (cq_room(ep->rx_cq) == 0)
			return -FI_EAGAIN;
		struct fi_cq_err_entry e = {
			.op_context = context, .flags = FI_RECV | (r.tagged ? FI_TAGGED : FI_MSG),
			.buf = r.buf, .tag = r.tag, .err = FI_ECANCELED,
		};
		memmove(&ep->recvs[i], &ep->recvs[i + 1], (ep->recv_count - i - 1) * sizeof(r));
		ep->recv_count--;
		complete_error(ep->rx_cq, &e);
		return 0;
	}
	return -FI_ENOENT;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid; (void)level; (void)optname; (void)optval; (void)optlen;
	return -FI_ENOPROTOOPT;
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	(void)fid; (void)level; (void)optname; (void)optval; (void)optlen;
	return -FI_ENOPROTOOPT;
}

static int no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep,
		  void *context)
{
	(void)sep; (void)index; (void)attr; (void)ep; (void)context;
	return -FI_ENOSYS;
}

static int no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
		     struct fid_ep **ep, void *context)
{
	return no_ctx(sep, index, attr, ep, context);
}

static int no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
		     struct fid_ep **ep, void *context)
{
	return no_ctx(sep, index, attr, ep, context);
}

static ssize_t ep_rx_size_left(struct fid_ep *fid)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	return (ssize_t)(RX_SIZE - ep->recv_count);
}

static ssize_t ep_tx_size_left(struct fid_ep *fid)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	ssize_t free_ops = 0;
	for (int i = 0; i < TX_SIZE; i++)
		free_ops += !ep->ops[i].busy;
	return free_ops;
}

static struct fi_ops_ep ep_base_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = no_tx_ctx,
	.rx_ctx = no_rx_ctx,
	.rx_size_left = ep_rx_size_left,
	.tx_size_left = ep_tx_size_left,
};

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	size_t room = *addrlen;
	*addrlen = sizeof(ep->node);
	if (room < sizeof(ep->node))
		return -FI_ETOOSMALL;
	memcpy(addr, &ep->node, sizeof(ep->node));
	return 0;
}

static int no_setname(fid_t fid, void *addr, size_t addrlen)
{
	(void)fid; (void)addr; (void)addrlen;
	return -FI_ENOSYS;
}

static int no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep; (void)addr; (void)addrlen;
	return -FI_ENOSYS;
}

static int no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t len)
{
	(void)ep; (void)addr; (void)param; (void)len;
	return -FI_ENOSYS;
}

static int no_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}

static int no_accept(struct fid_ep *ep, const void *param, size_t len)
{
	(void)ep; (void)param; (void)len;
	return -FI_ENOSYS;
}

static int no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t len)
{
	(void)pep; (void)handle; (void)param; (void)len;
	return -FI_ENOSYS;
}

static int no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep; (void)flags;
	return -FI_ENOSYS;
}

static int no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
		   void *context)
{
	(void)ep; (void)addr; (void)flags; (void)mc; (void)context;
	return -FI_ENOSYS;
}

static struct fi_ops_cm cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = no_setname,
	.getname = ep_getname,
	.getpeer = no_getpeer,
	.connect = no_connect,
	.listen = no_listen,
	.accept = no_accept,
	.reject = no_reject,
	.shutdown = no_shutdown,
	.join = no_join,
};

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	switch (bfid->fclass) {
	case FI_CLASS_AV: {
		struct oae_av *av = (struct oae_av *)bfid;
		if (av->ep || ep->av)
			return -FI_EINVAL;
		av->ep = ep;
		ep->av = av;
		return 0;
	}
	case FI_CLASS_CQ: {
		struct oae_cq *cq = (struct oae_cq *)bfid;
		if ((cq->ep && cq->ep != ep) || !(flags & (FI_TRANSMIT | FI_RECV)) ||
		    ((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
			return -FI_EINVAL;
		cq->ep = ep;
		if (flags & FI_TRANSMIT) {
			ep->tx_cq = cq;
			ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
		}
		if (flags & FI_RECV) {
			ep->rx_cq = cq;
			ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
		}
		return 0;
	}
	case FI_CLASS_EQ:
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	(void)arg;
	struct oae_ep *ep = (struct oae_ep *)fid;
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	if (!ep->av || !ep->tx_cq || !ep->rx_cq)
		return -FI_ENOCQ;
	ep->enabled = true;
	repost_pool(ep);
	return 0;
}

static int ep_close(struct fid *fid)
{
	struct oae_ep *ep = (struct oae_ep *)fid;
	if (ep->av)
		ep->av->ep = NULL;
	if (ep->tx_cq)
		ep->tx_cq->ep = NULL;
	if (ep->rx_cq)
		ep->rx_cq->ep = NULL;
	/* The dataplane withdraws the receives a queue left posted. */
	oae_queue_close(ep->queue);
	while (ep->unexpected) {
		struct unexpected *next = ep->unexpected->next;
		free(ep->unexpected);
		ep->unexpected = next;
	}
	free(ep);
	return 0;
}

static struct fi_ops ep_fid_ops = FID_OPS(ep_close, ep_bind, ep_control);

static int endpoint_open(struct fid_domain *fid, struct fi_info *info, struct fid_ep **out,
			 void *context)
{
	struct oae_domain *domain = (struct oae_domain *)fid;
	struct oae_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	if (oae_node_id(domain->control, &ep->node) != 0 ||
	    oae_queue_open(domain->ring, &ep->queue) != 0) {
		FI_WARN(&oae_prov, FI_LOG_EP_CTRL, "%s\n", oae_last_error());
		free(ep);
		return -FI_ENODEV;
	}
	/* A staging region per ring slot: one process holds a slot at a
	 * time, so no two endpoints share one; the next holder reuses it. */
	int slot = oae_queue_slot(ep->queue);
	int region = domain->staging + (slot > 0 ? slot : 0);
	int rc = region <= UINT16_MAX
			 ? oae_region_register(domain->control, (uint16_t)region, STAGING_KEY,
					       STAGING_LEN, "")
			 : OAE_ERR_INVALID;
	if (rc != 0 && rc != OAE_ERR_EXISTS) {
		FI_WARN(&oae_prov, FI_LOG_EP_CTRL, "staging region %d: %s\n", region,
			oae_last_error());
		oae_queue_close(ep->queue);
		free(ep);
		return -FI_ENODEV;
	}
	ep->staging = (uint16_t)region;
	if (oae_region_map(domain->ring, ep->staging, &ep->staging_map, &ep->staging_len) != 0 ||
	    ep->staging_len < STAGING_LEN) {
		FI_WARN(&oae_prov, FI_LOG_EP_CTRL, "staging region %d: %s\n", region,
			oae_last_error());
		oae_queue_close(ep->queue);
		free(ep);
		return -FI_ENODEV;
	}
	ep->caps = info && info->caps ? info->caps : OAE_CAPS;
	ep->domain = domain;
	ep->rnr_retries = domain->rnr_retries;
	ep->unexpected_tail = &ep->unexpected;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &ep_fid_ops;
	ep->ep.ops = &ep_base_ops;
	ep->ep.cm = &cm_ops;
	ep->ep.msg = &msg_ops;
	ep->ep.rma = &rma_ops;
	ep->ep.tagged = &tagged_ops;
	ep->ep.atomic = &atomic_ops;
	*out = &ep->ep;
	return 0;
}

/* ------------------------------------------------------ address vector */

static int av_insert(struct fid_av *fid, const void *addr, size_t count, fi_addr_t *fi_addr,
		     uint64_t flags, void *context)
{
	(void)flags; (void)context;
	struct oae_av *av = (struct oae_av *)fid;
	size_t done = 0;
	for (size_t i = 0; i < count; i++) {
		if (av->count == MAX_PEERS) {
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
			continue;
		}
		memcpy(&av->nodes[av->count], (const uint8_t *)addr + i * 8, 8);
		av->live[av->count] = true;
		if (fi_addr)
			fi_addr[i] = av->count;
		av->count++;
		done++;
	}
	if (av->ep)
		repost_pool(av->ep);
	return (int)done;
}

static int av_remove(struct fid_av *fid, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	(void)flags;
	struct oae_av *av = (struct oae_av *)fid;
	for (size_t i = 0; i < count; i++) {
		if (fi_addr[i] < av->count)
			av->live[fi_addr[i]] = false;
	}
	return 0;
}

static int av_lookup(struct fid_av *fid, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct oae_av *av = (struct oae_av *)fid;
	if (fi_addr >= av->count || !av->live[fi_addr])
		return -FI_EINVAL;
	size_t room = *addrlen;
	*addrlen = 8;
	if (room < 8)
		return -FI_ETOOSMALL;
	memcpy(addr, &av->nodes[fi_addr], 8);
	return 0;
}

static const char *av_straddr(struct fid_av *fid, const void *addr, char *buf, size_t *len)
{
	(void)fid;
	uint64_t node;
	memcpy(&node, addr, 8);
	int n = snprintf(buf, *len, "oae://node/%llu", (unsigned long long)node);
	*len = (size_t)n + 1;
	return buf;
}

static int no_insertsvc(struct fid_av *av, const char *node, const char *service,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	(void)av; (void)node; (void)service; (void)fi_addr; (void)flags; (void)context;
	return -FI_ENOSYS;
}

static int no_insertsym(struct fid_av *av, const char *node, size_t nodecnt, const char *service,
			size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	(void)av; (void)node; (void)nodecnt; (void)service; (void)svccnt; (void)fi_addr;
	(void)flags; (void)context;
	return -FI_ENOSYS;
}

static int no_av_set(struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **set,
		     void *context)
{
	(void)av; (void)attr; (void)set; (void)context;
	return -FI_ENOSYS;
}

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = no_insertsvc,
	.insertsym = no_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = no_av_set,
};

static int av_close(struct fid *fid)
{
	struct oae_av *av = (struct oae_av *)fid;
	if (av->ep)
		return -FI_EBUSY;
	free(av);
	return 0;
}

static struct fi_ops av_fid_ops = FID_OPS(av_close, no_bind, no_control);

static int av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **out,
		   void *context)
{
	(void)domain;
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE)
		return -FI_ENOSYS;
	struct oae_av *av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fid_ops;
	av->av.ops = &av_ops;
	*out = &av->av;
	return 0;
}

/* ---------------------------------------------------- memory regions */

static struct fi_ops mr_fid_ops = FID_OPS(close_and_free, no_bind, no_control);

/* Remote access names a region of this dataplane: it is registered with
 * the key's id and region key (or was already). Local access needs none. */
static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		  uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **out,
		  void *context)
{
	(void)buf; (void)offset; (void)flags;
	struct oae_domain *domain = (struct oae_domain *)fid;
	if (access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) {
		char perms[4] = { 0 };
		size_t n = 0;
		if (access & FI_REMOTE_READ)
			perms[n++] = 'r';
		if (access & FI_REMOTE_WRITE) {
			perms[n++] = 'w';
			perms[n++] = 'a';
		}
		uint32_t bytes = (uint32_t)((len + 7) & ~(size_t)7);
		int rc = oae_region_register(domain->control, key_region(requested_key),
					     key_key(requested_key), bytes, perms);
		if (rc != 0 && rc != OAE_ERR_EXISTS) {
			FI_WARN(&oae_prov, FI_LOG_MR, "%s\n", oae_last_error());
			return -FI_EINVAL;
		}
	}
	struct oae_mr *mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = context;
	mr->mr.fid.ops = &mr_fid_ops;
	mr->mr.key = requested_key;
	*out = &mr->mr;
	return 0;
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		   uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		   void *context)
{
	if (count != 1)
		return -FI_EINVAL;
	return mr_reg(fid, iov[0].iov_base, iov[0].iov_len, access, offset, requested_key, flags,
		      mr, context);
}

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
		      struct fid_mr **mr)
{
	return mr_regv(fid, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
		       attr->requested_key, flags, mr, attr->context);
}

static struct fi_ops_mr mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

/* ------------------------------------------------------------- domain */

static int query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
			struct fi_atomic_attr *attr, uint64_t flags)
{
	(void)domain;
	size_t count;
	int rc;
	if (flags & FI_COMPARE_ATOMIC)
		rc = atomic_compwritevalid(NULL, datatype, op, &count);
	else if (flags & FI_FETCH_ATOMIC)
		rc = atomic_readwritevalid(NULL, datatype, op, &count);
	else
		rc = atomic_writevalid(NULL, datatype, op, &count);
	if (rc)
		return rc;
	attr->count = count;
	attr->size = 8;
	return 0;
}

static int no_scalable_ep(struct fid_domain *d, struct fi_info *i, struct fid_ep **e, void *c)
{
	(void)d; (void)i; (void)e; (void)c;
	return -FI_ENOSYS;
}

static int no_cntr_open(struct fid_domain *d, struct fi_cntr_attr *a, struct fid_cntr **c,
			void *ctx)
{
	(void)d; (void)a; (void)c; (void)ctx;
	return -FI_ENOSYS;
}

static int no_poll_open(struct fid_domain *d, struct fi_poll_attr *a, struct fid_poll **p)
{
	(void)d; (void)a; (void)p;
	return -FI_ENOSYS;
}

static int no_stx_ctx(struct fid_domain *d, struct fi_tx_attr *a, struct fid_stx **s, void *c)
{
	(void)d; (void)a; (void)s; (void)c;
	return -FI_ENOSYS;
}

static int no_srx_ctx(struct fid_domain *d, struct fi_rx_attr *a, struct fid_ep **e, void *c)
{
	(void)d; (void)a; (void)e; (void)c;
	return -FI_ENOSYS;
}

static int no_query_collective(struct fid_domain *d, enum fi_collective_op op,
			       struct fi_collective_attr *a, uint64_t f)
{
	(void)d; (void)op; (void)a; (void)f;
	return -FI_ENOSYS;
}

static int endpoint2_open(struct fid_domain *d, struct fi_info *info, struct fid_ep **ep,
			  uint64_t flags, void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return endpoint_open(d, info, ep, context);
}

static struct fi_ops_domain domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = av_open,
	.cq_open = cq_open,
	.endpoint = endpoint_open,
	.scalable_ep = no_scalable_ep,
	.cntr_open = no_cntr_open,
	.poll_open = no_poll_open,
	.stx_ctx = no_stx_ctx,
	.srx_ctx = no_srx_ctx,
	.query_atomic = query_atomic,
	.query_collective = no_query_collective,
	.endpoint2 = endpoint2_open,
};

static struct fi_ops domain_fid_ops = FID_OPS(close_and_free, no_bind, no_control);

/* -------------------------------------------------- provider parameters */

struct settings {
	char *ring;
	char *control;
	int staging;
	int rnr_retries;
	int yield;
};

static int read_settings(struct settings *s)
{
	s->ring = NULL;
	s->control = NULL;
	s->staging = DEFAULT_STAGING_REGION;
	s->rnr_retries = DEFAULT_RNR_RETRIES;
	s->yield = 0;
	fi_param_get_bool(&oae_prov, "yield", &s->yield);
	fi_param_get_int(&oae_prov, "rnr_retries", &s->rnr_retries);
	fi_param_get_str(&oae_prov, "ring", &s->ring);
	fi_param_get_str(&oae_prov, "control", &s->control);
	fi_param_get_int(&oae_prov, "staging_region", &s->staging);
	if (!s->ring || !s->control) {
		FI_INFO(&oae_prov, FI_LOG_CORE,
			"FI_OAE_RING and FI_OAE_CONTROL name no dataplane: no oae fabric\n");
		return -FI_ENODATA;
	}
	if (s->rnr_retries < 0) {
		FI_WARN(&oae_prov, FI_LOG_CORE, "FI_OAE_RNR_RETRIES %d is negative\n",
			s->rnr_retries);
		return -FI_EINVAL;
	}
	if (s->staging < 1 || s->staging > 65535) {
		FI_WARN(&oae_prov, FI_LOG_CORE, "FI_OAE_STAGING_REGION %d is not a region id\n",
			s->staging);
		return -FI_EINVAL;
	}
	return 0;
}

static int domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **out,
		       void *context)
{
	(void)info;
	struct settings s;
	int rc = read_settings(&s);
	if (rc)
		return rc;
	struct oae_domain *domain = calloc(1, sizeof(*domain));
	if (!domain)
		return -FI_ENOMEM;
	snprintf(domain->ring, sizeof(domain->ring), "%s", s.ring);
	snprintf(domain->control, sizeof(domain->control), "%s", s.control);
	domain->staging = (uint16_t)s.staging;
	domain->rnr_retries = (unsigned)s.rnr_retries;
	domain->yield = s.yield != 0;
	domain->api_version = fabric->api_version;
	domain->domain.fid.fclass = FI_CLASS_DOMAIN;
	domain->domain.fid.context = context;
	domain->domain.fid.ops = &domain_fid_ops;
	domain->domain.ops = &domain_ops;
	domain->domain.mr = &mr_ops;
	*out = &domain->domain;
	return 0;
}

/* -------------------------------------------------------- event queue */

static ssize_t eq_read(struct fid_eq *eq, uint32_t *event, void *buf, size_t len,
		       uint64_t flags)
{
	(void)eq; (void)event; (void)buf; (void)len; (void)flags;
	return -FI_EAGAIN;
}

static ssize_t eq_readerr(struct fid_eq *eq, struct fi_eq_err_entry *buf, uint64_t flags)
{
	(void)eq; (void)buf; (void)flags;
	return -FI_EAGAIN;
}

static ssize_t eq_write(struct fid_eq *eq, uint32_t event, const void *buf, size_t len,
			uint64_t flags)
{
	(void)eq; (void)event; (void)buf; (void)len; (void)flags;
	return -FI_ENOSYS;
}

static ssize_t eq_sread(struct fid_eq *eq, uint32_t *event, void *buf, size_t len,
			int timeout, uint64_t flags)
{
	(void)timeout;
	return eq_read(eq, event, buf, len, flags);
}

static const char *eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data,
			       char *buf, size_t len)
{
	(void)eq; (void)err_data;
	const char *text = oae_strerror(prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", text);
		return buf;
	}
	return text;
}

static struct fi_ops_eq eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = eq_read,
	.readerr = eq_readerr,
	.write = eq_write,
	.sread = eq_sread,
	.strerror = eq_strerror,
};

static struct fi_ops eq_fid_ops = FID_OPS(close_and_free, no_bind, no_control);

/* An RDM endpoint raises no connection events: the queue stays empty. */
static int eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **out,
		   void *context)
{
	(void)fabric; (void)attr;
	struct oae_eq *eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	eq->eq.fid.fclass = FI_CLASS_EQ;
	eq->eq.fid.context = context;
	eq->eq.fid.ops = &eq_fid_ops;
	eq->eq.ops = &eq_ops;
	*out = &eq->eq;
	return 0;
}

/* ------------------------------------------------------------- fabric */

static int no_passive_ep(struct fid_fabric *f, struct fi_info *i, struct fid_pep **p, void *c)
{
	(void)f; (void)i; (void)p; (void)c;
	return -FI_ENOSYS;
}

static int no_wait_open(struct fid_fabric *f, struct fi_wait_attr *a, struct fid_wait **w)
{
	(void)f; (void)a; (void)w;
	return -FI_ENOSYS;
}

static int no_trywait(struct fid_fabric *f, struct fid **fids, int count)
{
	(void)f; (void)fids; (void)count;
	return -FI_ENOSYS;
}

static int domain2_open(struct fid_fabric *fabric, struct fi_info *info,
			struct fid_domain **dom, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return domain_open(fabric, info, dom, context);
}

static struct fi_ops_fabric fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = domain_open,
	.passive_ep = no_passive_ep,
	.eq_open = eq_open,
	.wait_open = no_wait_open,
	.trywait = no_trywait,
	.domain2 = domain2_open,
};

static struct fi_ops fabric_fid_ops = FID_OPS(close_and_free, no_bind, no_control);

static int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **out, void *context)
{
	(void)attr;
	struct oae_fabric *fabric = calloc(1, sizeof(*fabric));
	if (!fabric)
		return -FI_ENOMEM;
	fabric->fabric.fid.fclass = FI_CLASS_FABRIC;
	fabric->fabric.fid.context = context;
	fabric->fabric.fid.ops = &fabric_fid_ops;
	fabric->fabric.ops = &fabric_ops;
	fabric->fabric.api_version = attr->api_version;
	*out = &fabric->fabric;
	return 0;
}

/* ------------------------------------------------------------ getinfo */

/* Whether `hints` ask for nothing this provider lacks. */
static bool hints_fit(const struct fi_info *hints)
{
	if (!hints)
		return true;
	if (hints->caps & ~OAE_CAPS)
		return false;
	if (hints->addr_format != FI_FORMAT_UNSPEC)
		return false;
	if (hints->ep_attr) {
		if (hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != FI_EP_RDM)
			return false;
		if (hints->ep_attr->max_msg_size > MAX_MSG)
			return false;
	}
	if (hints->tx_attr && (hints->tx_attr->msg_order || hints->tx_attr->inject_size ||
				hints->tx_attr->size > TX_SIZE))
		return false;
	if (hints->rx_attr && (hints->rx_attr->msg_order || hints->rx_attr->size > RX_SIZE))
		return false;
	if (hints->domain_attr) {
		const struct fi_domain_attr *d = hints->domain_attr;
		if (d->name && strcmp(d->name, OAE_FI_NAME))
			return false;
		/* The application serializes a domain's calls, or says nothing. */
		if (d->threading != FI_THREAD_UNSPEC && d->threading != FI_THREAD_DOMAIN)
			return false;
		if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
			return false;
		if (d->cq_data_size > 4)
			return false;
		/* Keys and offsets the application chooses: never BASIC. */
		if (d->mr_mode == FI_MR_BASIC)
			return false;
		if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_TABLE)
			return false;
	}
	if (hints->fabric_attr && hints->fabric_attr->name &&
	    strcmp(hints->fabric_attr->name, OAE_FI_NAME))
		return false;
	return true;
}

static int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	(void)node; (void)service; (void)flags;
	struct settings s;
	int rc = read_settings(&s);
	if (rc)
		return rc;
	if (!hints_fit(hints))
		return -FI_ENODATA;
	uint64_t self;
	if (oae_node_id(s.control, &self) != 0) {
		FI_WARN(&oae_prov, FI_LOG_CORE, "%s\n", oae_last_error());
		return -FI_ENODATA;
	}
	struct fi_info *fi = fi_allocinfo();
	if (!fi)
		return -FI_ENOMEM;
	/* What the application asked for, or everything offered. */
	uint64_t caps = hints && hints->caps ? hints->caps : OAE_CAPS;
	fi->caps = caps;
	fi->mode = 0;
	fi->addr_format = FI_FORMAT_UNSPEC;
	fi->src_addr = malloc(sizeof(self));
	if (!fi->src_addr) {
		fi_freeinfo(fi);
		return -FI_ENOMEM;
	}
	memcpy(fi->src_addr, &self, sizeof(self));
	fi->src_addrlen = sizeof(self);
	if (hints && hints->dest_addr && hints->dest_addrlen == 8) {
		fi->dest_addr = malloc(8);
		if (fi->dest_addr) {
			memcpy(fi->dest_addr, hints->dest_addr, 8);
			fi->dest_addrlen = 8;
		}
	}

	fi->tx_attr->caps = caps;
	/* A message sent again after its peer had no receive posted may
	 * overtake a later one: no order is promised. */
	fi->tx_attr->msg_order = FI_ORDER_NONE;
	fi->tx_attr->comp_order = FI_ORDER_NONE;
	fi->tx_attr->inject_size = 0;
	fi->tx_attr->size = TX_SIZE;
	fi->tx_attr->iov_limit = 1;
	fi->tx_attr->rma_iov_limit = 1;

	fi->rx_attr->caps = caps;
	fi->rx_attr->msg_order = FI_ORDER_NONE;
	fi->rx_attr->comp_order = FI_ORDER_NONE;
	fi->rx_attr->size = RX_SIZE;
	fi->rx_attr->iov_limit = 1;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_UNSPEC;
	fi->ep_attr->max_msg_size = MAX_MSG;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	fi->domain_attr->name = strdup(OAE_FI_NAME);
	fi->domain_attr->threading = FI_THREAD_DOMAIN;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
	fi->domain_attr->av_type = FI_AV_TABLE;
	fi->domain_attr->mr_mode =
		FI_VERSION_LT(version, FI_VERSION(1, 5)) ? FI_MR_SCALABLE : 0;
	fi->domain_attr->mr_key_size = 8;
	fi->domain_attr->cq_data_size = 4;
	fi->domain_attr->cq_cnt = 16;
	fi->domain_attr->ep_cnt = 1;
	fi->domain_attr->tx_ctx_cnt = 1;
	fi->domain_attr->rx_ctx_cnt = 1;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->mr_cnt = 64;

	fi->fabric_attr->name = strdup(OAE_FI_NAME);
	fi->fabric_attr->api_version = version;
	if (!fi->domain_attr->name || !fi->fabric_attr->name) {
		fi_freeinfo(fi);
		return -FI_ENOMEM;
	}
	*info = fi;
	return 0;
}

static void cleanup(void)
{
}

static struct fi_provider oae_prov = {
	.name = OAE_FI_NAME,
	.version = OAE_FI_VERSION,
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.getinfo = getinfo,
	.fabric = fabric_open,
	.cleanup = cleanup,
};

FI_EXT_INI
{
	fi_param_define(&oae_prov, "ring", FI_PARAM_STRING,
			"The host ring of the oaed to use (its [host] ring)");
	fi_param_define(&oae_prov, "control", FI_PARAM_STRING,
			"That oaed's control socket");
	fi_param_define(&oae_prov, "rnr_retries", FI_PARAM_INT,
			"Times a message goes again, each at the next progress, while the "
			"peer has no receive posted, before it fails FI_ENORX (default 100000)");
	fi_param_define(&oae_prov, "yield", FI_PARAM_BOOL,
			"Give up the CPU (sched_yield) when a completion queue read finds "
			"nothing, for programs that share a CPU with the dataplane (default no)");
	fi_param_define(&oae_prov, "staging_region", FI_PARAM_INT,
			"Region id the provider registers in that oaed for messages and READs "
			"landing (default 65000)");
	return &oae_prov;
}
