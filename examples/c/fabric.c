/*
 * A libfabric program that knows nothing of OAE: messages, tagged
 * messages, RMA and atomics on an FI_EP_RDM endpoint of whichever provider
 * FI_PROVIDER names (written for "oae"; see liboae/fi/README.md).
 *
 *   cc examples/c/fabric.c -lfabric -o fabric
 *   ./fabric server <peer-address> <messages>
 *   ./fabric client <peer-address> <region-key> <offset> <messages>
 *
 * An address is the peer endpoint's name (`fi_getname`) as a hexadecimal
 * integer: for "oae", the peer dataplane's node id. The client writes,
 * reads and changes 1028 bytes of the server side's registered memory at
 * <offset> under the remote key <region-key>; it prints its ledger of what
 * that memory must now hold.
 * Exits 0 if everything completed as expected.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
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

#define MAX_MESSAGES 64
#define TAG_BASE 0x7a900
#define DONE_TAG 0xd0e

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *txcq, *rxcq;
static struct fid_av *av;
static fi_addr_t peer;
static int failures;

#define CHECK(call)                                                                \
	do {                                                                       \
		int rc_ = (int)(call);                                             \
		if (rc_) {                                                         \
			fprintf(stderr, "%s: %s\n", #call, fi_strerror(-rc_));     \
			exit(2);                                                   \
		}                                                                  \
	} while (0)

static void expect(bool ok, const char *what)
{
	printf("%-52s %s\n", what, ok ? "ok" : "WRONG");
	if (!ok)
		failures++;
}

/* Posts with `post` until the provider has room, progressing meanwhile. */
#define POST(post)                                                                 \
	do {                                                                       \
		ssize_t rc_;                                                       \
		while ((rc_ = (post)) == -FI_EAGAIN) {                             \
			struct fi_cq_tagged_entry e_;                              \
			(void)fi_cq_read(txcq, &e_, 0);                            \
		}                                                                  \
		if (rc_) {                                                         \
			fprintf(stderr, "%s: %s\n", #post, fi_strerror((int)-rc_)); \
			exit(2);                                                   \
		}                                                                  \
	} while (0)

/* The next completion of `cq`; an error one is returned in `err` with 1. */
static int next(struct fid_cq *cq, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	for (;;) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			if (fi_cq_readerr(cq, err, 0) == 1)
				return 1;
		} else if (n != -FI_EAGAIN) {
			fprintf(stderr, "fi_cq_read: %s\n", fi_strerror((int)-n));
			exit(2);
		}
	}
}

/* Waits for one successful completion of `cq`. */
static struct fi_cq_tagged_entry complete(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	if (next(cq, &e, &err)) {
		char text[128];
		fprintf(stderr, "%s failed: %s (provider: %s)\n", what, fi_strerror(err.err),
			fi_cq_strerror(cq, err.prov_errno, err.err_data, text, sizeof(text)));
		exit(2);
	}
	return e;
}

static void open_endpoint(uint64_t caps, uint64_t peer_address)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->caps = caps;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup(getenv("FI_PROVIDER") ? getenv("FI_PROVIDER")
								     : "oae");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 256 };
	CHECK(fi_cq_open(domain, &cq_attr, &txcq, NULL));
	CHECK(fi_cq_open(domain, &cq_attr, &rxcq, NULL));
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(ep, &rxcq->fid, FI_RECV));
	CHECK(fi_enable(ep));
	if (fi_av_insert(av, &peer_address, 1, &peer, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert refused the peer's address\n");
		exit(2);
	}
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

static void close_endpoint(void)
{
	CHECK(fi_close(&ep->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&rxcq->fid));
	CHECK(fi_close(&txcq->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
}

/* The server: every message the client sends lands, whole, in the receive
 * that matches it: tagged ones by tag whatever their order, plain ones in
 * any plain receive. */
static void serve(int messages)
{
	static char plain[MAX_MESSAGES][64], tagged[MAX_MESSAGES][64];
	for (int i = 0; i < messages; i++) {
		POST(fi_trecv(ep, tagged[i], sizeof(tagged[i]), NULL, FI_ADDR_UNSPEC,
			      TAG_BASE + (uint64_t)i, 0, tagged[i]));
		POST(fi_recv(ep, plain[i], sizeof(plain[i]), NULL, FI_ADDR_UNSPEC, plain[i]));
	}
	printf("ready\n");
	fflush(stdout);
	bool seen[MAX_MESSAGES] = { false };
	int with_data = 0;
	for (int n = 0; n < 2 * messages; n++) {
		struct fi_cq_tagged_entry e = complete(rxcq, "a receive");
		if (e.flags & FI_REMOTE_CQ_DATA)
			with_data += e.data == 0xabcd;
		if (e.flags & FI_TAGGED) {
			int i = (int)((char(*)[64])e.op_context - tagged);
			char want[64];
			snprintf(want, sizeof(want), "tagged %d", i);
			if (e.tag != TAG_BASE + (uint64_t)i || strcmp(tagged[i], want)) {
				printf("tag %#" PRIx64 " carried \"%s\"\n", e.tag, tagged[i]);
				failures++;
			}
		} else {
			int i = (int)((char(*)[64])e.op_context - plain);
			int k = -1;
			if (sscanf(plain[i], "plain %d", &k) != 1 || k < 0 || k >= messages || seen[k]) {
				printf("a plain receive got \"%s\"\n", plain[i]);
				failures++;
			} else {
				seen[k] = true;
			}
		}
	}
	expect(failures == 0, "every message in the receive that matches it");
	expect(with_data == 1, "the one message with remote CQ data carried it");
	const char done[] = "done";
	POST(fi_tsend(ep, done, sizeof(done), NULL, peer, DONE_TAG, NULL));
	complete(txcq, "the last message");
}

static void client(uint64_t rkey, uint64_t base, int messages)
{
	char done[16] = { 0 };
	POST(fi_trecv(ep, done, sizeof(done), NULL, peer, DONE_TAG, 0, NULL));
	/* Tagged messages go in reverse order: the server matches by tag. */
	char text[64];
	for (int i = messages - 1; i >= 0; i--) {
		snprintf(text, sizeof(text), "tagged %d", i);
		POST(fi_tsend(ep, text, strlen(text) + 1, NULL, peer, TAG_BASE + (uint64_t)i, NULL));
		complete(txcq, "a tagged send");
	}
	for (int i = 0; i < messages; i++) {
		snprintf(text, sizeof(text), "plain %d", i);
		if (i == 0)
			POST(fi_senddata(ep, text, strlen(text) + 1, NULL, 0xabcd, peer, NULL));
		else
			POST(fi_send(ep, text, strlen(text) + 1, NULL, peer, NULL));
		complete(txcq, "a send");
	}
	expect(true, "every send completed");

	/* RMA: 32 bytes written, then read back. */
	uint8_t out[32], in[32] = { 0 };
	for (int i = 0; i < 32; i++)
		out[i] = (uint8_t)(0xa0 + i);
	POST(fi_write(ep, out, sizeof(out), NULL, peer, base + 32, rkey, NULL));
	complete(txcq, "fi_write");
	POST(fi_read(ep, in, sizeof(in), NULL, peer, base + 32, rkey, NULL));
	complete(txcq, "fi_read");
	expect(memcmp(in, out, sizeof(in)) == 0, "fi_read reads what fi_write wrote");

	/* A frame's worth: 900 bytes, written and read back whole. */
	static uint8_t big[900], back[900];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	POST(fi_write(ep, big, sizeof(big), NULL, peer, base + 128, rkey, NULL));
	complete(txcq, "a 900-byte fi_write");
	POST(fi_read(ep, back, sizeof(back), NULL, peer, base + 128, rkey, NULL));
	complete(txcq, "a 900-byte fi_read");
	expect(memcmp(big, back, sizeof(big)) == 0, "900 bytes written and read back whole");

	/* Atomics on the word at `base`: 0 + 5 + 2 = 7; CAS 7 -> 9; CAS 1 ->
	 * fails; write 11 (fetching 9). */
	uint64_t operand = 5, compare, result = 0;
	POST(fi_atomic(ep, &operand, 1, NULL, peer, base, rkey, FI_UINT64, FI_SUM, NULL));
	complete(txcq, "FI_SUM");
	operand = 2;
	POST(fi_fetch_atomic(ep, &operand, 1, NULL, &result, NULL, peer, base, rkey, FI_UINT64,
			     FI_SUM, NULL));
	complete(txcq, "fetching FI_SUM");
	expect(result == 5, "fetching FI_SUM returns the word before (5)");
	POST(fi_fetch_atomic(ep, &operand, 1, NULL, &result, NULL, peer, base, rkey, FI_UINT64,
			     FI_ATOMIC_READ, NULL));
	complete(txcq, "FI_ATOMIC_READ");
	expect(result == 7, "FI_ATOMIC_READ reads 7");
	operand = 9;
	compare = 7;
	POST(fi_compare_atomic(ep, &operand, 1, NULL, &compare, NULL, &result, NULL, peer, base,
			       rkey, FI_UINT64, FI_CSWAP, NULL));
	complete(txcq, "FI_CSWAP");
	expect(result == 7, "FI_CSWAP 7 -> 9 finds 7");
	compare = 1;
	operand = 100;
	POST(fi_compare_atomic(ep, &operand, 1, NULL, &compare, NULL, &result, NULL, peer, base,
			       rkey, FI_UINT64, FI_CSWAP, NULL));
	complete(txcq, "FI_CSWAP that misses");
	expect(result == 9, "FI_CSWAP 1 -> 100 finds 9 and changes nothing");
	operand = 11;
	POST(fi_fetch_atomic(ep, &operand, 1, NULL, &result, NULL, peer, base, rkey, FI_UINT64,
			     FI_ATOMIC_WRITE, NULL));
	complete(txcq, "FI_ATOMIC_WRITE");
	expect(result == 9, "FI_ATOMIC_WRITE 11 returns 9");

	/* A wrong key: an error completion, and nothing changes. */
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	POST(fi_write(ep, out, 8, NULL, peer, base, rkey ^ 1, NULL));
	bool failed = next(txcq, &e, &err) == 1;
	char why[128] = "";
	if (failed)
		fi_cq_strerror(txcq, err.prov_errno, err.err_data, why, sizeof(why));
	printf("a write under a wrong key: %s, provider code %d: %s\n",
	       failed ? fi_strerror(err.err) : "completed", failed ? err.prov_errno : 0, why);
	expect(failed && err.err == FI_EKEYREJECTED, "a wrong key fails FI_EKEYREJECTED");

	struct fi_cq_tagged_entry d = complete(rxcq, "the server's last message");
	expect(d.tag == DONE_TAG && strcmp(done, "done") == 0, "the server saw every message");
	printf("ledger: word %#" PRIx64 " = 11; bytes %#" PRIx64 "..+32 = a0..bf; bytes %#" PRIx64
	       "..+900 = i * 7\n",
	       base, base + 32, base + 128);
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "server")) {
		int messages = atoi(argv[3]);
		if (messages < 1 || messages > MAX_MESSAGES)
			return 2;
		open_endpoint(FI_MSG | FI_TAGGED, strtoull(argv[2], NULL, 16));
		serve(messages);
	} else if (argc >= 6 && !strcmp(argv[1], "client")) {
		int messages = atoi(argv[5]);
		if (messages < 1 || messages > MAX_MESSAGES)
			return 2;
		open_endpoint(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC, strtoull(argv[2], NULL, 16));
		client(strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0), messages);
	} else {
		fprintf(stderr, "usage: %s server <peer> <messages> | "
				"client <peer> <region-key> <offset> <messages>\n",
			argv[0]);
		return 2;
	}
	close_endpoint();
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
