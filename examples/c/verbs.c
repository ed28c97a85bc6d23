/*
 * A host program in C: attaches to a running oaed's host ring through
 * liboae, posts verbs against the peer's memory and polls completions,
 * as a libibverbs program posts work requests and polls its CQ.
 *
 *   cargo xtask install-c --prefix /tmp/oae
 *   export PKG_CONFIG_PATH=/tmp/oae/lib/pkgconfig
 *   cc examples/c/verbs.c $(pkg-config --cflags --libs oae) -o verbs
 *   LD_LIBRARY_PATH=/tmp/oae/lib ./verbs /dev/shm/oae-host-a /run/oae/a.sock 1 0x0ae1 4096 2
 *
 * Arguments: the host ring, the dataplane's control socket, the peer's
 * region and key, a byte offset of 128 free bytes in it, and a region of
 * the dataplane's own where READs land (at the same offset), as an RDMA
 * READ lands in a registered buffer. Exits 0 if every verb completed as
 * expected.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oae.h"

#define FAA_VERBS 64
#define WINDOW 8

static oae_queue *queue;
static int failures;

/* Polls until one completion arrives (the dataplane answers each verb
 * exactly once; the ring is never silent for long on a live link). */
static struct oae_wc wait_one(void) {
    struct oae_wc wc;
    for (;;) {
        int n = oae_poll_cq(queue, 1, &wc);
        if (n < 0) {
            fprintf(stderr, "oae_poll_cq: %s: %s\n", oae_strerror(n), oae_last_error());
            exit(2);
        }
        if (n == 1)
            return wc;
    }
}

static void expect(int ok, const char *what, const struct oae_wc *wc) {
    printf("%-40s %s (status %u: %s)\n", what, ok ? "ok" : "WRONG", wc->status,
           oae_strerror((int)wc->status));
    if (!ok)
        failures++;
}

/* Reads where a READ landed in the dataplane's own memory. */
static void read_local(const char *control, uint16_t local, uint32_t offset, uint8_t *buf,
                       uint32_t len) {
    int rc = oae_region_read(control, local, offset, buf, len);
    if (rc != 0) {
        fprintf(stderr, "oae_region_read: %s: %s\n", oae_strerror(rc), oae_last_error());
        exit(2);
    }
}

static void post_or_die(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "%s: %s: %s\n", what, oae_strerror(rc), oae_last_error());
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s RING CONTROL_SOCKET REGION KEY OFFSET LOCAL_REGION\n", argv[0]);
        return 2;
    }
    const char *control = argv[2];
    uint16_t region = (uint16_t)strtoul(argv[3], NULL, 0);
    uint32_t key = (uint32_t)strtoul(argv[4], NULL, 0);
    uint32_t base = (uint32_t)strtoul(argv[5], NULL, 0);
    uint16_t local = (uint16_t)strtoul(argv[6], NULL, 0);

    int rc = oae_queue_open(argv[1], &queue);
    if (rc != 0) {
        fprintf(stderr, "oae_queue_open: %s: %s\n", oae_strerror(rc), oae_last_error());
        return 2;
    }

    /* WRITE then READ back 32 bytes. */
    uint8_t pattern[32];
    for (int i = 0; i < 32; i++)
        pattern[i] = (uint8_t)(0xa0 + i);
    post_or_die(oae_post_write(queue, 1, region, key, base + 32, pattern, 32), "write");
    struct oae_wc wc = wait_one();
    expect(wc.wr_id == 1 && wc.opcode == OAE_OP_WRITE && wc.status == OAE_WC_SUCCESS, "write 32 bytes",
           &wc);
    post_or_die(oae_post_read(queue, 2, region, key, base + 32, local, base + 32, 32), "read");
    wc = wait_one();
    uint8_t landed[32];
    read_local(control, local, base + 32, landed, 32);
    expect(wc.status == OAE_WC_SUCCESS && wc.len == 32 && memcmp(landed, pattern, 32) == 0,
           "read them back into local memory", &wc);

    /* CAS 0 -> 7 swaps; CAS 0 -> 9 then finds 7. */
    post_or_die(oae_post_cas(queue, 3, region, key, base, 0, 7), "cas");
    wc = wait_one();
    expect(wc.status == OAE_WC_SUCCESS && wc.swapped && wc.old == 0, "cas 0 -> 7 swaps", &wc);
    post_or_die(oae_post_cas(queue, 4, region, key, base, 0, 9), "cas");
    wc = wait_one();
    expect(wc.status == OAE_WC_SUCCESS && !wc.swapped && wc.old == 7, "cas 0 -> 9 finds 7", &wc);

    /* A window of FETCH-ADDs of 1 over WINDOW words (verb k adds to word
     * k % WINDOW): each word's old values 0 .. FAA_VERBS / WINDOW - 1 come
     * back exactly once. A verb refused because another verb of the window
     * held its word (OAE_WC_REFUSED_LOCKED, no effect) is posted again. */
    uint8_t seen[WINDOW][FAA_VERBS / WINDOW];
    memset(seen, 0, sizeof seen);
    int posted = 0, done = 0, in_flight = 0, retried = 0;
    uint64_t again[FAA_VERBS];
    int to_retry = 0;
    while (done < FAA_VERBS) {
        while (in_flight < WINDOW && (to_retry > 0 || posted < FAA_VERBS)) {
            uint64_t k = to_retry > 0 ? again[to_retry - 1] : (uint64_t)posted;
            rc = oae_post_faa(queue, k, region, key, base + 64 + 8 * (uint32_t)(k % WINDOW), 1);
            if (rc == OAE_ERR_AGAIN)
                break;
            post_or_die(rc, "faa");
            if (to_retry > 0)
                to_retry--;
            else
                posted++;
            in_flight++;
        }
        struct oae_wc batch[WINDOW];
        int n = oae_poll_cq(queue, WINDOW, batch);
        if (n < 0) {
            fprintf(stderr, "oae_poll_cq: %s\n", oae_strerror(n));
            return 2;
        }
        for (int i = 0; i < n; i++) {
            struct oae_wc *c = &batch[i];
            in_flight--;
            if (c->status == OAE_WC_REFUSED_LOCKED && to_retry < FAA_VERBS) {
                again[to_retry++] = c->wr_id;
                retried++;
                continue;
            }
            int w = (int)(c->wr_id % WINDOW);
            if (c->status != OAE_WC_SUCCESS || c->opcode != OAE_OP_FAA ||
                c->old >= FAA_VERBS / WINDOW || seen[w][c->old]++) {
                expect(0, "fetch-add", c);
            }
            done++;
        }
    }
    int all_seen = 1;
    for (int w = 0; w < WINDOW; w++)
        for (int i = 0; i < FAA_VERBS / WINDOW; i++)
            all_seen &= seen[w][i] == 1;
    printf("%-40s %s (%d posted again after OAE_WC_REFUSED_LOCKED)\n",
           "fetch-adds: each old value once", all_seen ? "ok" : "WRONG", retried);
    failures += !all_seen;

    /* A wrong key: refused by the target, no effect. */
    post_or_die(oae_post_swap(queue, 5, region, key ^ 1, base, 42), "swap");
    wc = wait_one();
    expect(wc.wr_id == 5 && wc.status == OAE_WC_REFUSED_BAD_KEY, "swap with a wrong key refused", &wc);
    post_or_die(oae_post_read(queue, 6, region, key, base, local, base, 8), "read");
    wc = wait_one();
    uint64_t word;
    read_local(control, local, base, (uint8_t *)&word, 8);
    expect(wc.status == OAE_WC_SUCCESS && word == 7, "the word still holds 7", &wc);

    /* A READ of several frames goes a frame a verb and completes once; one
     * longer than a transfer is refused before posting. */
    post_or_die(oae_post_read(queue, 11, region, key, base, local, base, 2000), "read");
    wc = wait_one();
    expect(wc.wr_id == 11 && wc.status == OAE_WC_SUCCESS && wc.len == 2000,
           "a 2000-byte read completes once", &wc);
    rc = oae_post_read(queue, 7, region, key, base, local, base, OAE_MAX_TRANSFER + 1);
    printf("%-40s %s (%s)\n", "oversized read refused", rc == OAE_ERR_INVALID ? "ok" : "WRONG",
           oae_last_error());
    failures += rc != OAE_ERR_INVALID;

    /* Where verbs go: a link the queue does not have, a node nobody
     * reaches (each refused, no effect), then its first link again. */
    post_or_die(oae_queue_to_link(queue, 7), "to link 7");
    post_or_die(oae_post_faa(queue, 8, region, key, base, 1), "faa");
    wc = wait_one();
    expect(wc.status == OAE_WC_NO_SUCH_LINK, "a verb to a link the queue lacks refused", &wc);
    post_or_die(oae_queue_to_node(queue, 0xdeadbeef), "to node");
    post_or_die(oae_post_faa(queue, 9, region, key, base, 1), "faa");
    wc = wait_one();
    expect(wc.status == OAE_WC_NO_ROUTE, "a verb to a node nobody reaches refused", &wc);
    post_or_die(oae_queue_to_link(queue, 0), "to link 0");
    post_or_die(oae_post_faa(queue, 10, region, key, base, 0), "faa");
    wc = wait_one();
    expect(wc.status == OAE_WC_SUCCESS && wc.old == 7, "link 0 again: the word still holds 7", &wc);

    oae_queue_close(queue);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
