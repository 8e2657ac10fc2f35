/* crc32c.h - CRC-32C (Castagnoli), the checksum of the container's header,
 * dense tensors and expert records (docs/container.md) (internal). */
#ifndef COLI_CRC32C_H
#define COLI_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc (0 to start) over n bytes: the same value on every CPU; the
 * crc32 instruction is used where the CPU has it. */
uint32_t coli__crc32c(uint32_t crc, const void *p, size_t n);

#endif
