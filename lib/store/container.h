/* container.h - the streaming container model.coli written by coli convert
 * and read at open (internal). docs/container.md is the format. */
#ifndef COLI_CONTAINER_H
#define COLI_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"

#define COLI_CONT_FILE "model.coli"
#define COLI_CONT_MAGIC "COLI\r\n\x1a\n"
#define COLI_CONT_VERSION 1
#define COLI_CONT_HEADER 128
#define COLI_CONT_DIRENT 128
#define COLI_CONT_LAYOUT 96
#define COLI_CONT_RECENT 16
#define COLI_CONT_NAME 72
#define COLI_CONT_ALIGN 4096

typedef struct coli__cont_tensor {
    char name[COLI_CONT_NAME];
    uint8_t dtype, stored;
    uint16_t group;
    uint8_t is_vec, kind, role;
    int rows, cols;
    uint64_t offset, bytes;
    uint32_t crc;
} coli__cont_tensor;

/* One of the three matrices of every expert of a layer. */
typedef struct coli__cont_mat {
    uint8_t dtype, stored;
    uint16_t group;
    int rows, cols;
    uint32_t offset;   /* inside the record */
    uint64_t bytes;
} coli__cont_mat;

typedef struct coli__cont_record {
    uint64_t offset;
    uint32_t bytes, crc;
} coli__cont_record;

typedef struct coli__container {
    char *path;
    int fd;
    const uint8_t *map;       /* the whole file, read-only */
    uint64_t size;
    int weights;              /* coli_weight_format */
    int q4_group;
    int n_layers, n_experts, n_moe;
    uint32_t config_crc;
    size_t n_tensors;
    coli__cont_tensor *tensors;
    coli__cont_mat *layouts;  /* [n_layers * 3]; zero for dense layers */
    int *moe_index;           /* [n_layers] index among MoE layers, -1 dense */
    coli__cont_record *records; /* [n_moe * n_experts] */
    uint64_t record_max;      /* largest padded record */
    uint64_t dense_bytes;     /* the dense region */
} coli__container;

/* Opens dir/model.coli and checks it (docs/container.md, "What is
 * checked"), dir/config.json's checksum included. */
coli_status coli__cont_open(const char *dir, coli__container **out, coli__err *err);
/* CRC-32C of a whole file (config.json), for the reader and the writer. */
coli_status coli__file_crc(const char *path, uint32_t *crc, coli__err *err);
void coli__cont_close(coli__container *c);
/* 1 if dir holds a model.coli. */
int coli__cont_present(const char *dir);

const coli__cont_tensor *coli__cont_find(const coli__container *c, const char *name);
/* The record of expert e of layer l (a MoE layer), or NULL. */
const coli__cont_record *coli__cont_record_of(const coli__container *c, int l, int e);
/* Checks the checksum of a record's bytes (read into buf, or in the
 * mapping when buf is NULL); the error names the file, layer and expert. */
coli_status coli__cont_verify(const coli__container *c, int l, int e, const void *buf, coli__err *err);

/* Little-endian field access, for the reader and the writer. */
static inline void coli__put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void coli__put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t coli__get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t coli__get64(const uint8_t *p)
{
    return (uint64_t)coli__get32(p) | (uint64_t)coli__get32(p + 4) << 32;
}

#endif
