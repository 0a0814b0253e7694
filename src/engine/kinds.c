/* The job kinds, one row each (engine.h: sinpe_kind): the rules a kind adds to the common
 * ones, the shape of a fresh result, the plan's layout and memory, and the stages it runs.
 * The check (engine/job.c) and the plan (engine/plan.c) dispatch on this table only; each
 * kind's functions are in its own file (engine/table.c, rope.c, map.c, freqs.c). */
#include "engine/engine.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const sinpe_kind kinds[SINPE_JOB_KIND_COUNT] = {
    [SINPE_JOB_TABLE] = {
        .own_axes = 1,
        .check = sinpe_table_check,
        .kept = sinpe_table_kept,
        .fresh = sinpe_table_fresh,
        .complete = sinpe_table_complete,
        .layout = sinpe_table_layout,
        .scratch = sinpe_table_scratch,
        .alloc = sinpe_table_alloc,
        .bind = sinpe_table_bind,
        .release = sinpe_table_release,
        .stages = sinpe_table_stages,
        .nstages = COUNT(sinpe_table_stages),
    },
    [SINPE_JOB_ADD] = {
        .own_axes = 1,
        .check = sinpe_table_check,
        .kept = sinpe_table_kept,
        .fresh = NULL,
        .complete = sinpe_table_complete,
        .layout = sinpe_table_layout,
        .scratch = sinpe_table_scratch,
        .alloc = sinpe_table_alloc,
        .bind = sinpe_table_bind,
        .release = sinpe_table_release,
        .stages = sinpe_table_stages,
        .nstages = COUNT(sinpe_table_stages),
    },
    [SINPE_JOB_ROPE] = {
        .check = sinpe_rope_check,
        .fresh = NULL,
        .layout = sinpe_rope_setup,
        .stages = sinpe_rope_stages,
        .nstages = COUNT(sinpe_rope_stages),
    },
    [SINPE_JOB_MAP] = {
        .check = sinpe_map_check,
        .fresh = sinpe_map_fresh,
        .layout = sinpe_map_layout,
        .stages = sinpe_map_stages,
        .nstages = COUNT(sinpe_map_stages),
    },
    [SINPE_JOB_FREQS] = {
        .check = sinpe_freq_check,
        .fresh = sinpe_freq_fresh,
        .layout = sinpe_freq_layout,
        .stages = sinpe_freq_stages,
        .nstages = COUNT(sinpe_freq_stages),
    },
};

const sinpe_kind *sinpe_kind_of(sinpe_job_kind kind)
{
    return (unsigned)kind < SINPE_JOB_KIND_COUNT ? &kinds[kind] : NULL;
}
