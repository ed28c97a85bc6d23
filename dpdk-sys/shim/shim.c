#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_errno.h>

#include "shim.h"

uint16_t oae_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t oae_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

int oae_mbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned n)
{
	return rte_pktmbuf_alloc_bulk(pool, mbufs, n);
}

void oae_mbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

uint8_t *oae_mbuf_data(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, uint8_t *);
}

uint16_t oae_mbuf_data_len(const struct rte_mbuf *m)
{
	return m->data_len;
}

uint16_t oae_mbuf_capacity(const struct rte_mbuf *m)
{
	return (uint16_t)(m->buf_len - m->data_off);
}

void oae_mbuf_set_len(struct rte_mbuf *m, uint16_t len)
{
	m->data_len = len;
	m->pkt_len = len;
}

int oae_mbuf_is_contiguous(const struct rte_mbuf *m)
{
	return rte_pktmbuf_is_contiguous(m);
}

int oae_errno(void)
{
	return rte_errno;
}
