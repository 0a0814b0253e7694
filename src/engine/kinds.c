/* The job kinds, one row each (engine.h: sinpe_kind): the rules a kind adds to the common
 * ones, the shape of a fresh result, the plan's layout and memory, and the stages it runs.
 * The check (engine/job.c) and the plan (engine/plan.c) dispatch on this table only; each
 * kind's functions are in its own file (engine/table.c, rope.c, map.c, freqs.c). */
#include "engine/engine.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* TABLE and ADD run the table's functions (engine/table.c); an ADD writes into x, so only a
 * TABLE has a fresh result. */
#define TABLE_FUNCTIONS(fresh_shape)                                                         \
    {                                                                                        \
        .own_axes = 1,                                                                       \
        .check = sinpe_table_check,                                                          \
        .kept = sinpe_table_kept,                                                            \
        .fresh = (fresh_shape),                                                              \
        .complete = sinpe_table_complete,                                                    \
        .layout = sinpe_table_layout,                                                        \
        .scratch = sinpe_table_scratch,                                                      \
        .alloc = sinpe_table_alloc,                                                          \
        .bind = sinpe_table_bind,                                                            \
        .release = sinpe_table_release,                                                      \
        .stages = sinpe_table_stages,                                                        \
        .nstages = COUNT(sinpe_table_stages),                                                \
    }

/* ROPE, MAP and FREQS: a check, a fresh shape (or NULL), a layout and stages, no axes, kept
 * rows or memory of their own. */
#define STAGED(check_fn, fresh_shape, layout_fn, stage_list)                                 \
    {                                                                                        \
        .check = (check_fn),                                                                 \
        .fresh = (fresh_shape),                                                              \
        .layout = (layout_fn),                                                               \
        .stages = (stage_list),                                                              \
        .nstages = COUNT(stage_list),                                                        \
    }

static const sinpe_kind kinds[SINPE_JOB_KIND_COUNT] = {
    [SINPE_JOB_TABLE] = TABLE_FUNCTIONS(sinpe_table_fresh),
    [SINPE_JOB_ADD] = TABLE_FUNCTIONS(NULL),
    [SINPE_JOB_ROPE] = STAGED(sinpe_rope_check, NULL, sinpe_rope_setup, sinpe_rope_stages),
    [SINPE_JOB_MAP] = STAGED(sinpe_map_check, sinpe_map_fresh, sinpe_map_layout,
                             sinpe_map_stages),
    [SINPE_JOB_FREQS] = STAGED(sinpe_freq_check, sinpe_freq_fresh, sinpe_freq_layout,
                               sinpe_freq_stages),
};

const sinpe_kind *sinpe_kind_of(sinpe_job_kind kind)
{
    return (unsigned)kind < SINPE_JOB_KIND_COUNT ? &kinds[kind] : NULL;
}
