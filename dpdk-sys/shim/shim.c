#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_errno.h>

#include "shim.h"

#define OAE_FRAMES_MAX 64

static void describe(struct oae_frame *f, struct rte_mbuf *m)
{
	f->mbuf = m;
	f->data = rte_pktmbuf_mtod(m, uint8_t *);
	f->len = m->data_len;
	f->room = (uint16_t)(m->buf_len - m->data_off);
	f->reusable = 0;
}

uint16_t oae_rx_frames(uint16_t port, uint16_t queue, const struct rte_mempool *pool,
		       struct oae_frame *frames, uint16_t n, uint16_t *chained)
{
	struct rte_mbuf *pkts[OAE_FRAMES_MAX];
	uint16_t got, kept = 0;

	if (n > OAE_FRAMES_MAX)
		n = OAE_FRAMES_MAX;
	got = rte_eth_rx_burst(port, queue, pkts, n);
	*chained = 0;
	for (uint16_t i = 0; i < got; i++) {
		struct rte_mbuf *m = pkts[i];

		if (!rte_pktmbuf_is_contiguous(m)) {
			rte_pktmbuf_free(m);
			(*chained)++;
			continue;
		}
		describe(&frames[kept], m);
		frames[kept].reusable = RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1 &&
					m->pool == pool;
		kept++;
	}
	return kept;
}

uint16_t oae_tx_frames(uint16_t port, uint16_t queue, struct oae_frame *frames, uint16_t n)
{
	struct rte_mbuf *pkts[OAE_FRAMES_MAX];

	if (n > OAE_FRAMES_MAX)
		n = OAE_FRAMES_MAX;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = frames[i].mbuf;

		/* A received mbuf carrying an answer keeps what the receive
		 * path set (offload flags, packet type, VLAN): clear it, as
		 * rte_pktmbuf_reset would, leaving the packet where it is. */
		m->ol_flags &= RTE_MBUF_F_EXTERNAL;
		m->packet_type = 0;
		m->vlan_tci = 0;
		m->vlan_tci_outer = 0;
		m->data_len = frames[i].len;
		m->pkt_len = frames[i].len;
		pkts[i] = m;
	}
	return rte_eth_tx_burst(port, queue, pkts, n);
}

int oae_alloc_frames(struct rte_mempool *pool, struct oae_frame *frames, uint16_t n)
{
	struct rte_mbuf *pkts[OAE_FRAMES_MAX];

	if (n > OAE_FRAMES_MAX)
		return -1;
	if (rte_pktmbuf_alloc_bulk(pool, pkts, n) != 0)
		return -1;
	for (uint16_t i = 0; i < n; i++)
		describe(&frames[i], pkts[i]);
	return 0;
}

void oae_free_frames(struct oae_frame *frames, uint16_t n)
{
	struct rte_mbuf *pkts[OAE_FRAMES_MAX];

	if (n > OAE_FRAMES_MAX)
		n = OAE_FRAMES_MAX;
	for (uint16_t i = 0; i < n; i++)
		pkts[i] = frames[i].mbuf;
	rte_pktmbuf_free_bulk(pkts, n);
}

int oae_thread_register(void)
{
	if (rte_lcore_id() != LCORE_ID_ANY)
		return 1;
	return rte_thread_register();
}

void oae_thread_unregister(void)
{
	rte_thread_unregister();
}

int oae_errno(void)
{
	return rte_errno;
}
