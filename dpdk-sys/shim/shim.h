/* The parts of DPDK's fast path that are static inline functions or
 * macros in its headers, as real functions Rust can call. Every mbuf
 * field access stays on this side, so the Rust code never depends on
 * rte_mbuf's layout (bitfields and unions that vary between releases). */
#ifndef OAE_DPDK_SHIM_H
#define OAE_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;

uint16_t oae_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t oae_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
/* 0 on success, all or nothing. */
int oae_mbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned n);
void oae_mbuf_free(struct rte_mbuf *m);
/* The packet's first byte. */
uint8_t *oae_mbuf_data(struct rte_mbuf *m);
uint16_t oae_mbuf_data_len(const struct rte_mbuf *m);
/* Bytes the packet may grow to in this single-segment mbuf. */
uint16_t oae_mbuf_capacity(const struct rte_mbuf *m);
/* Sets a single-segment packet's length (data_len and pkt_len). */
void oae_mbuf_set_len(struct rte_mbuf *m, uint16_t len);
/* True when the mbuf is one segment. */
int oae_mbuf_is_contiguous(const struct rte_mbuf *m);
/* rte_errno of the calling thread. */
int oae_errno(void);

#endif
