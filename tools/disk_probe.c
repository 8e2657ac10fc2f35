/*
 * disk_probe.c - random-read bandwidth of a model's disk (see disk_probe.h).
 *
 * The reads are what the expert store's I/O threads do on a miss: one
 * record, one pread, at an aligned offset. Offsets come from a fixed
 * sequence (a hash of the read's number), so that runs read the same
 * places whatever the threads' timing.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT */
#endif

#include "disk_probe.h"

#include "options.h" /* cli_prog */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096
#define MAX_READERS 64

typedef struct probe {
    int fd;
    int direct;
    const char *path;
    uint64_t rec;        /* bytes per read, a multiple of ALIGN */
    uint64_t positions;  /* aligned offsets a read may start at */
    double start;
    atomic_uint_fast64_t next;  /* the number of the next read */
    atomic_uint_fast64_t bytes;
    atomic_int failed;          /* errno of the first failed read, else 0 */
    uint64_t failed_at;
} probe;

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: the offset of read i. */
static uint64_t mix(uint64_t i)
{
    uint64_t z = i * 0x9e3779b97f4a7c15u + 0x2545f4914f6cdd1du;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Reads rec bytes at off in full; 0 or an errno (EIO for a short file). */
static int read_full(int fd, void *buf, uint64_t rec, uint64_t off)
{
    uint64_t got = 0;

    while (got < rec) {
        ssize_t n = pread(fd, (char *)buf + got, (size_t)(rec - got), (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return EIO;
        got += (uint64_t)n;
    }
    return 0;
}

static void *reader(void *arg)
{
    probe *p = arg;
    void *buf = NULL;

    if (posix_memalign(&buf, ALIGN, (size_t)p->rec) != 0) {
        int none = 0;
        atomic_compare_exchange_strong(&p->failed, &none, ENOMEM);
        return NULL;
    }
    for (;;) {
        uint64_t i = atomic_fetch_add(&p->next, 1), off;
        int err;

        if (i >= DISK_PROBE_READS || atomic_load(&p->failed) != 0 ||
            now_seconds() - p->start >= DISK_PROBE_SECONDS)
            break;
        off = (mix(i) % p->positions) * ALIGN;
        err = read_full(p->fd, buf, p->rec, off);
        if (err != 0) {
            int none = 0;
            if (atomic_compare_exchange_strong(&p->failed, &none, err))
                p->failed_at = off;
            break;
        }
        /* Without O_DIRECT, the next read of this range must go to the
         * disk again. */
        if (!p->direct)
            posix_fadvise(p->fd, (off_t)off, (off_t)p->rec, POSIX_FADV_DONTNEED);
        atomic_fetch_add(&p->bytes, p->rec);
    }
    free(buf);
    return NULL;
}

/* Opens path with O_DIRECT when the file system takes it (one aligned
 * read tells: some accept the flag at open and refuse the read). */
static int open_probe(probe *p)
{
    void *buf = NULL;

    p->direct = 0;
#ifdef O_DIRECT
    p->fd = open(p->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (p->fd >= 0 && posix_memalign(&buf, ALIGN, ALIGN) == 0) {
        if (pread(p->fd, buf, ALIGN, 0) >= 0)
            p->direct = 1;
        free(buf);
    }
    if (p->direct)
        return 0;
    if (p->fd >= 0)
        close(p->fd);
#endif
    p->fd = open(p->path, O_RDONLY | O_CLOEXEC);
    if (p->fd < 0)
        return errno;
    posix_fadvise(p->fd, 0, 0, POSIX_FADV_DONTNEED);
    return 0;
}

int disk_probe_run(const char *path, uint64_t record_bytes, int readers, disk_probe *out)
{
    pthread_t tids[MAX_READERS];
    struct stat sb;
    probe p;
    double end;
    int started = 0, err, k;
    uint64_t reads;

    memset(out, 0, sizeof *out);
    memset(&p, 0, sizeof p);
    p.path = path;
    p.rec = (record_bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (p.rec == 0)
        p.rec = ALIGN;
    if (readers < 1)
        readers = 1;
    if (readers > MAX_READERS)
        readers = MAX_READERS;
    if ((err = open_probe(&p)) != 0) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, path, strerror(err));
        return 1;
    }
    if (fstat(p.fd, &sb) != 0 || (uint64_t)sb.st_size < p.rec) {
        fprintf(stderr, "%s: %s: smaller than one record of %" PRIu64 " bytes\n", cli_prog, path,
                p.rec);
        close(p.fd);
        return 1;
    }
    p.positions = ((uint64_t)sb.st_size - p.rec) / ALIGN + 1;
    atomic_init(&p.next, 0);
    atomic_init(&p.bytes, 0);
    atomic_init(&p.failed, 0);
    p.start = now_seconds();
    for (k = 0; k < readers - 1; k++) {
        if (pthread_create(&tids[k], NULL, reader, &p) != 0)
            break;
        started++;
    }
    reader(&p); /* the calling thread is one of the readers */
    for (k = 0; k < started; k++)
        pthread_join(tids[k], NULL);
    end = now_seconds();
    close(p.fd);
    if ((err = atomic_load(&p.failed)) != 0) {
        fprintf(stderr, "%s: %s: reading %" PRIu64 " bytes at offset %" PRIu64 ": %s\n", cli_prog,
                path, p.rec, p.failed_at, strerror(err));
        return 1;
    }
    reads = atomic_load(&p.bytes) / p.rec;
    out->done = 1;
    out->direct = p.direct;
    out->readers = started + 1;
    out->record_bytes = p.rec;
    out->reads = reads;
    out->seconds = end - p.start;
    out->mb_s = out->seconds > 0 ? (double)(reads * p.rec) / out->seconds / 1e6 : 0.0;
    out->reads_s = out->seconds > 0 ? (double)reads / out->seconds : 0.0;
    return 0;
}
