/*
 * disk_probe.h - `coli bench --disk-probe`: the random-read bandwidth of the
 * disk that holds a converted model, in reads of the size the expert store
 * makes (one record), so that the store's own disk reads during decode can
 * be set against what the disk gives.
 */
#ifndef COLI_TOOLS_DISK_PROBE_H
#define COLI_TOOLS_DISK_PROBE_H

#include <stdint.h>

/* Reads stop after this many, or after DISK_PROBE_SECONDS, whichever
 * comes first. */
#define DISK_PROBE_READS 4096
#define DISK_PROBE_SECONDS 2.0

typedef struct disk_probe {
    int done;               /* 0 when the probe was not run */
    int direct;             /* 1: O_DIRECT; 0: cached reads, each range dropped
                               from the page cache after it is read */
    int readers;            /* concurrent readers */
    uint64_t record_bytes;  /* bytes per read: the record, rounded up to 4096 */
    uint64_t reads;         /* reads done */
    double seconds;
    double mb_s;            /* bytes / seconds / 1e6 */
    double reads_s;
} disk_probe;

/*
 * Reads records of record_bytes at random 4096-aligned offsets of the file
 * path into 4096-aligned buffers, with readers threads at once. The file
 * is opened with O_DIRECT; where the file system refuses it, with plain
 * reads after posix_fadvise(POSIX_FADV_DONTNEED). Returns 0, or 1 after a
 * message naming the file.
 */
int disk_probe_run(const char *path, uint64_t record_bytes, int readers, disk_probe *out);

#endif /* COLI_TOOLS_DISK_PROBE_H */
