/*
 * cmd_info.c - `coli info`: a model's architecture, sizes, parameters,
 * weights, KV cache, GPU tier, expert store and CPU kernels.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "commands.h"
#include "help_texts.h"
#include "jsonout.h"
#include "model_args.h"
#include "options.h"
#include "store_report.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- coli info ------------------------------------------------------------ */

const char info_synopsis[] =
    "Usage: coli info [--model DIR] [OPTION]...\n"
    "Load a model and describe it: architecture, sizes, parameters, weights.\n";

const opthelp info_options[] = {
    H_MODEL,
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text or json (default text)"},
    H_VERBOSE,
    H_END,
};

/* Bytes per weight format: what --weights would hold, and read per token. */
static void print_format_bytes(const coli_model *model)
{
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++) {
        uint64_t t = 0, act = 0;
        if (coli_model_weight_bytes(model, (coli_weight_format)f, &t, &act) != COLI_OK)
            continue;
        const char *name = f == COLI_WEIGHTS_AUTO ? "as stored" : coli_weight_format_name((coli_weight_format)f);
        printf("  %-10s        %" PRIu64 " bytes (%.1f MiB), %" PRIu64 " bytes read per token\n", name, t,
               (double)t / (1024.0 * 1024.0), act);
    }
}

static void json_format_bytes(const coli_model *model)
{
    printf(",\"bytes_per_format\":{");
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++) {
        uint64_t t = 0, act = 0;
        coli_model_weight_bytes(model, (coli_weight_format)f, &t, &act);
        const char *name = f == COLI_WEIGHTS_AUTO ? "stored" : coli_weight_format_name((coli_weight_format)f);
        printf("%s\"%s\":{\"total\":%" PRIu64 ",\"active\":%" PRIu64 "}", f ? "," : "", name, t, act);
    }
    printf("}");
}

/* Size of dir/name, 0 if it cannot be read. */
static uint64_t file_bytes(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path || stat(path, &sb) != 0)
        return 0;
    return (uint64_t)sb.st_size;
}

int cmd_info(const args *a)
{
    model_args m;
    coli_model_info info;
    coli_store_stats store;
    coli_model *model = NULL;
    const char *arch;
    uint64_t container_bytes = 0;
    int json, rc;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;

    rc = 1;
    if (open_model(&m, &model) != 0 || get_info(model, &info) != 0 ||
        store_report_read(model, &store) != 0)
        goto done;
    arch = info.architecture ? info.architecture : "";
    if (store.mode != COLI_STORE_RESIDENT) /* a converted model: the file's own size */
        container_bytes = file_bytes(m.dir, "model.coli");
    if (json) {
        printf("{\"model\":");
        json_string(stdout, m.dir, strlen(m.dir));
        printf(",\"architecture\":");
        json_string(stdout, arch, strlen(arch));
        printf(",\"n_layers\":%d,\"n_moe_layers\":%d,\"hidden_size\":%d,\"n_heads\":%d,"
               "\"n_kv_heads\":%d,\"head_dim\":%d,\"vocab_size\":%d,\"n_experts\":%d,"
               "\"n_experts_active\":%d,\"moe_intermediate_size\":%d,\"router\":\"%s\",\"n_expert_groups\":%d,"
               "\"n_expert_groups_active\":%d,\"routed_scaling\":%.9g,\"shared_intermediate_size\":%d,"
               "\"intermediate_size\":%d,\"rotary_dim\":%d,\"qkv_bias\":%s,\"n_mtp_layers\":%d,\"mtp_loaded\":%s,"
               "\"max_positions\":%d,\"attention\":\"%s\",\"kv_lora_rank\":%d,\"q_lora_rank\":%d,"
               "\"v_head_dim\":%d,\"rope_scaling\":\"%s\",\"rope_factor\":%.9g,\"rope_original_positions\":%d,"
               "\"index_topk\":%d,\"index_heads\":%d,\"index_head_dim\":%d,\"index_shared_layers\":%d,"
               "\"n_params_total\":%" PRId64 ",\"n_params_active\":%" PRId64
               ",\"weight_bytes\":%" PRIu64 ",\"weights\":",
               info.n_layers, info.n_moe_layers, info.hidden_size, info.n_heads,
               info.n_kv_heads, info.head_dim, info.vocab_size, info.n_experts,
               info.n_experts_active, info.moe_intermediate_size, info.router, info.n_expert_groups,
               info.n_expert_groups_active, (double)info.routed_scaling, info.shared_intermediate_size,
               info.intermediate_size, info.rotary_dim, info.qkv_bias ? "true" : "false", info.n_mtp_layers,
               info.mtp_loaded ? "true" : "false", info.max_positions, info.attention, info.kv_lora_rank,
               info.q_lora_rank, info.v_head_dim, info.rope_scaling, (double)info.rope_factor,
               info.rope_original_positions, info.index_topk, info.index_heads, info.index_head_dim,
               info.index_shared_layers, info.n_params_total, info.n_params_active, info.weight_bytes);
        json_string(stdout, weights_label(&info), strlen(weights_label(&info)));
        if (info.weights_detail) {
            printf(",\"weights_detail\":");
            json_string(stdout, info.weights_detail, strlen(info.weights_detail));
        }
        json_format_bytes(model);
        if (container_bytes > 0)
            printf(",\"container_bytes\":%" PRIu64, container_bytes);
        printf(",\"context_positions\":%" PRId64 ",\"kv_bytes\":%" PRIu64 ",\"kv_bytes_per_position\":%" PRIu64
               ",\"kv_type\":\"%s\"",
               info.context_positions, info.kv_bytes, info.kv_bytes_per_position, kv_type_name(info.kv_type));
        printf(",\"gpu_devices\":%d,\"gpu_detail\":", info.gpu_devices);
        json_string(stdout, info.gpu_detail ? info.gpu_detail : "off",
                    strlen(info.gpu_detail ? info.gpu_detail : "off"));
        printf(",\"store_detail\":");
        json_string(stdout, info.store_detail ? info.store_detail : "resident",
                    strlen(info.store_detail ? info.store_detail : "resident"));
        store_report_json(stdout, &store);
        printf(",\"cpu_kernels\":");
        json_string(stdout, info.cpu_kernels ? info.cpu_kernels : "unknown",
                    strlen(info.cpu_kernels ? info.cpu_kernels : "unknown"));
        printf(",\"bos_id\":%" PRId32 ",\"eos_id\":%" PRId32 "}\n", info.bos_id, info.eos_id);
    } else {
        printf("model:              %s\n", m.dir);
        printf("architecture:       %s\n", arch);
        printf("layers:             %d (%d MoE)\n", info.n_layers, info.n_moe_layers);
        printf("hidden size:        %d\n", info.hidden_size);
        if (strcmp(info.attention, "mla") == 0) {
            printf("attention heads:    %d, latent attention (MLA): head dim %d, values %d\n", info.n_heads,
                   info.head_dim, info.v_head_dim);
            printf("latent:             kv_lora_rank %d, rotary key %d", info.kv_lora_rank, info.rotary_dim);
            if (info.q_lora_rank > 0)
                printf(", q_lora_rank %d", info.q_lora_rank);
            printf("\n");
            if (info.index_topk > 0) {
                printf("sparse attention:   DSA, the best %d positions a token; indexer %d heads of %d",
                       info.index_topk, info.index_heads, info.index_head_dim);
                if (info.index_shared_layers > 0)
                    printf(", %d layer%s an earlier layer's choice", info.index_shared_layers,
                           info.index_shared_layers == 1 ? " shares" : "s share");
                printf("\n");
            }
        } else {
            printf("attention heads:    %d (%d KV heads, head dim %d)\n", info.n_heads, info.n_kv_heads,
                   info.head_dim);
        }
        printf("vocabulary:         %d\n", info.vocab_size);
        printf("experts:            %d per MoE layer, %d active per token\n", info.n_experts,
               info.n_experts_active);
        printf("moe intermediate:   %d\n", info.moe_intermediate_size);
        printf("router:             %s", info.router);
        if (info.n_expert_groups > 1)
            printf(", best %d of %d expert groups", info.n_expert_groups_active, info.n_expert_groups);
        if (info.routed_scaling != 1.0f)
            printf(", weights scaled by %g", (double)info.routed_scaling);
        printf("\n");
        if (info.shared_intermediate_size > 0)
            printf("shared experts:     intermediate %d, in every MoE layer\n", info.shared_intermediate_size);
        if (info.intermediate_size > 0)
            printf("dense layers:       %d, intermediate %d\n", info.n_layers - info.n_moe_layers,
                   info.intermediate_size);
        printf("rotary dimensions:  %d of %d%s\n", info.rotary_dim, info.head_dim,
               info.qkv_bias ? "; q/k/v biases" : "");
        if (info.n_mtp_layers > 0)
            printf("MTP layers:         %d stored, %s\n", info.n_mtp_layers,
                   info.mtp_loaded ? "the first loaded (--mtp)" : "not loaded (--mtp drafts with the first)");
        printf("max positions:      %d", info.max_positions);
        if (strcmp(info.rope_scaling, "yarn") == 0)
            printf(" (YaRN: factor %g over %d original positions)", (double)info.rope_factor,
                   info.rope_original_positions);
        printf("\n");
        printf("parameters:         %" PRId64 " total, %" PRId64 " active per token\n",
               info.n_params_total, info.n_params_active);
        printf("weights:            %s, %" PRIu64 " bytes (%.1f MiB)\n", weights_label(&info),
               info.weight_bytes, (double)info.weight_bytes / (1024.0 * 1024.0));
        if (info.weights_detail)
            printf("  by matrix:        %s\n", info.weights_detail);
        print_format_bytes(model);
        if (container_bytes > 0)
            printf("model.coli:         %" PRIu64 " bytes (%.1f MiB) on disk\n", container_bytes,
                   (double)container_bytes / (1024.0 * 1024.0));
        printf("kv cache:           %" PRIu64 " bytes (%.1f MiB) for %" PRId64 " positions, %" PRIu64
               " bytes per position in %s\n",
               info.kv_bytes, (double)info.kv_bytes / (1024.0 * 1024.0), info.context_positions,
               info.kv_bytes_per_position, kv_type_name(info.kv_type));
        printf("gpu:                %s\n", info.gpu_detail ? info.gpu_detail : "off");
        printf("store:              %s\n", info.store_detail ? info.store_detail : "resident");
        printf("cpu kernels:        %s\n", info.cpu_kernels ? info.cpu_kernels : "unknown");
        printf("cpu kernel sets:   ");
        static const char *const sets[] = {"scalar", "avx2", "avx512", "amx"};
        for (int i = 0; i < 4; i++)
            if (coli_cpu_kernels_usable(i + 1))
                printf("%s %s", i ? "," : "", sets[i]);
        printf(" (--cpu; this CPU and build)\n");
        if (info.bos_id >= 0)
            printf("bos id:             %" PRId32 "\n", info.bos_id);
        else
            printf("bos id:             none\n");
        if (info.eos_id >= 0)
            printf("eos id:             %" PRId32 "\n", info.eos_id);
        else
            printf("eos id:             none\n");
    }
    rc = 0;
done:
    coli_model_free(model);
    return rc;
}
