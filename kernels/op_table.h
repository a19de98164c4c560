/* kernels/op_table.h — tasks described by data: one descriptor per task
 * (its name, argument struct, the ranges of its size fields, and each
 * access with its role, element type, privilege and element-count rule
 * computed from the args), and one check, rp_op_prep, that every task
 * variant runs before touching data: it copies the args, checks their
 * ranges, then checks every access (present, of its type, dense row-major,
 * at least as many elements as its rule asks) and hands out the pointers.
 * Adding a task is one descriptor plus its CPU and CUDA bodies and one
 * line of RP_KERNEL_TASKS (kernels/tasks.h): the recipe, with a worked
 * example, is docs/architecture.md, "Adding a task".
 *
 * Each launch's declared privileges are checked against the descriptor's
 * before the task runs or is recorded (rp_op_check_privs, which the
 * engine runs for every task rp_kernels_register registered: RP_EINVAL),
 * and then rp_op_prep's own checks, less those an interpolation of the
 * launch may change (rp_op_check_launch), so that a launch the body
 * would refuse is refused by the call, not in a replay.
 *
 * Errors of rp_op_prep (with rp_error_detail naming the task, the access
 * and the sizes; a rejected task touched nothing):
 *   RP_EINVAL  args missing or shorter than the struct; a field outside
 *              its range; the descriptor's args hook refused them; sizes
 *              whose product overflows; an access the task writes
 *              overlapping another one (except its `alias`);
 *   RP_ESHAPE  an access missing (too few accesses), more accesses than
 *              the descriptor has (one the task would never touch), an
 *              access not dense, or with fewer elements than its rule;
 *   RP_ETYPE   an access of the wrong element type;
 *   anything the descriptor's hooks return (RP_ERANGE for a position, a
 *   token or a batch index out of range). */
#ifndef RP_KERNELS_OP_TABLE_H
#define RP_KERNELS_OP_TABLE_H

#include "reprise.h"
#include "tasks.h"

#include <stddef.h>
#include <stdint.h>

/* A field of the args struct, by offset + 1 (0: none). */
#define RP_OPF(type, member) ((uint16_t)(offsetof(type, member) + 1))

/* How the elements an access needs are computed from the args:
 *   mul * (product of the int32 fields) + add
 * (a rule with no fields has product 1), or, by kind: */
enum rp_op_count_kind {
  RP_OPC_PRODUCT = 0,
  /* field[0] is an int64 count (times mul, plus add) */
  RP_OPC_I64 = 1,
  /* the int32 field[0], or the volume of access 0 when it is 0 (the
   * elementwise tasks' "n == 0: the whole instance") */
  RP_OPC_N_OR_VOL0 = 2,
  /* the volume of the first access of the same group (multi-tensor
   * tasks: G_i and M_i hold at least W_i's elements) */
  RP_OPC_GROUP_VOL = 3,
};

typedef struct rp_op_count {
  int64_t mul;
  uint16_t field[4]; /* RP_OPF(...) of int32 fields; 0: unused */
  int64_t add;
  uint8_t kind; /* enum rp_op_count_kind */
} rp_op_count;

/* Rules that recur: the elementwise count of field f (access 0's volume
 * when it is 0), a group's volume, and one element. */
/* clang-format off */
#define RP_OPC_N(f) {1, {f}, 0, RP_OPC_N_OR_VOL0}
#define RP_OPC_GROUP {1, {0}, 0, RP_OPC_GROUP_VOL}
#define RP_OPC_ONE {0, {0}, 1, RP_OPC_PRODUCT}
/* clang-format on */

enum rp_op_access_flags {
  RP_OPA_OPTIONAL = 1u << 0, /* may be left out (a shorter access list) */
  RP_OPA_ANY_TYPE = 1u << 1, /* any element type (dtype ignored) */
  RP_OPA_ALSO_F32 = 1u << 2, /* also_when names a float field (nonzero:
                              * != 0.0f), not an int32 one */
  /* An RP_WRITE access whose task writes every element its rule counts,
   * from its first one on, in every run (the rule is exact, not "at
   * least"): when that count reaches the instance's volume, the write
   * covers the whole instance, and copy insertion need not fill its
   * mirror first (rp_op_writes_whole). Without it a WRITE access's
   * mirror is filled: the task may leave elements as they were. */
  RP_OPA_WRITES_ALL = 1u << 3,
};

typedef struct rp_op_access {
  const char *role; /* as the task's contract names it */
  rp_dtype dtype;
  /* What the task does with the access: RP_READ (reads it, writes
   * nothing), RP_WRITE (overwrites the elements its rule counts, reads
   * none), RP_RW, or RP_REDUCE (folds into it atomically) — plus `also`
   * while the field also_when is nonzero (gpt.matmul_bwd's dinp: WRITE,
   * also READ when accumulate). Every launch of the task is checked
   * against it (rp_op_check_privs): the declared privilege is this one
   * or RP_RW. */
  rp_privilege priv;
  rp_op_count need;
  uint16_t when;      /* RP_OPF of an int32 field: the access exists only when
                       * that field is nonzero (a bias); 0: always */
  unsigned flags;     /* rp_op_access_flags */
  uint8_t alias;      /* head access index + 1 whose memory this one may be
                       * (the same first element: an elementwise in place
                       * update); 0: none. Every other access the task
                       * writes (priv WRITE or RW) shares no byte of the
                       * elements its rule counts with any other access. */
  rp_privilege also;  /* privilege bits added while also_when is on */
  uint16_t also_when; /* RP_OPF of an int32 field (a float one with
                       * RP_OPA_ALSO_F32); 0: none */
  const char *also_name; /* that field's name, for the messages */
} rp_op_access;

/* A size field's range: lo <= value <= hi. */
typedef struct rp_op_field {
  const char *name;
  uint16_t field; /* RP_OPF */
  uint8_t i64;    /* 1: an int64 field, else int32 */
  int64_t lo, hi;
} rp_op_field;

#define RP_OP_MAX_FIELDS 8
#define RP_OP_MAX_ACCESSES 8
/* The most accesses one launch of an op may have (gpt.adamw's 4 x 512 +
 * 2); rp_op_prep refuses more (RP_ESHAPE). */
#define RP_OP_MAX_TOTAL 2050

typedef struct rp_op rp_op;

struct rp_op {
  const char *name;      /* "gpt.embed_fwd" */
  const char *args_type; /* "rp_gpt_embed_args", for the messages */
  size_t args_size;
  rp_op_field fields[RP_OP_MAX_FIELDS]; /* checked in order; name NULL ends */
  /* More checks of the args after the ranges (divisibility, floats), or
   * normalisation of the local copy (norm 0 -> rows). NULL: none. */
  rp_status (*check_args)(const rp_op *op, void *args, const rp_task_ctx *ctx);
  /* Accesses: `head`, then `group` repeated count times (count: the int32
   * field group_count, within the range of its rp_op_field), then `tail`. */
  rp_op_access head[RP_OP_MAX_ACCESSES];
  rp_op_access group[RP_OP_MAX_ACCESSES];
  rp_op_access tail[2];
  uint8_t nhead, ngroup, ntail;
  uint16_t group_count; /* RP_OPF of the count field (group != 0) */
  /* Checks that need the instances (aliasing, dtype agreement), after the
   * accesses passed. NULL: none. */
  rp_status (*check_ptrs)(const rp_op *op, const void *args, void *const *ptr,
                          const rp_task_ctx *ctx);
};

/* An args struct in a descriptor: .args_type = "type", .args_size. */
#define RP_OP_ARGS(type) .args_type = #type, .args_size = sizeof(type)

/* Total accesses op takes for args (head + group * count + tail; tail
 * accesses switched off by their `when` field at the tail's end are not
 * counted: the caller leaves them out). */
uint32_t rp_op_access_total(const rp_op *op, const void *args);

/* The privilege check of a launch (the engine runs it on every launch,
 * recorded launch, builder call and instantiate's validation of a task
 * registered with op, before anything runs or is recorded): each access
 * acc[i] must be declared with the privilege its descriptor gives it
 * under args (priv, plus `also` when also_when is nonzero or written by
 * one of the interpolations, whose values a replay may change), or with
 * RP_RW. A WRITE declared for an access the task reads is refused too:
 * a WRITE access's old contents may be dropped (copy insertion does not
 * fill its mirror when rp_op_writes_whole says the write covers it). Not
 * checked here, and left to rp_op_check_launch (which the engine runs
 * next) and rp_op_prep: args shorter than the struct, a group count out
 * of range, accesses past the descriptor's, an access its `when` field
 * switches off (unless an interpolation writes that field). RP_EINVAL, the
 * detail "task 'NAME': access I (ROLE) is declared RP_X, and the task ...". */
rp_status rp_op_check_privs(const rp_op *op, const void *args, size_t args_size,
                            const rp_access *acc, uint32_t nacc,
                            const rp_interp *interps, uint32_t ninterp);

/* 1 when a launch of op with args (and interps) writes every element of
 * access i, whose instance has vol[i] elements (vol: nacc entries, -1
 * where unknown): the access is flagged RP_OPA_WRITES_ALL, is written and
 * not read under args, is switched on, and its rule's count under args
 * reaches vol[i], with no interpolation writing a field the rule or the
 * access's existence depends on (a replay could shrink the count). 0
 * otherwise: the engine then assumes the task may leave elements of the
 * access as they were (copy insertion fills its mirror). */
int rp_op_writes_whole(const rp_op *op, const void *args, size_t args_size,
                       const int64_t *vol, uint32_t nacc, uint32_t i,
                       const rp_interp *interps, uint32_t ninterp);

/* The one check: copies op->args_size bytes of args into `args`, checks
 * them, then the accesses (and that no written one overlaps another),
 * and sets ptr[i] to access i's element at
 * rect.lo (NULL for an absent optional or conditional access) and, when
 * vol is not NULL, vol[i] to its volume (0 when absent). ptr and vol hold
 * `cap` entries: one per access the task may take, head + group x count +
 * every tail access (a tail access switched off by its `when` field gets
 * its NULL, 0 entry past rp_op_access_total); RP_ESHAPE, nothing written,
 * when cap is smaller. */
rp_status rp_op_prep(const rp_op *op, const rp_task_ctx *ctx, void *args,
                     void **ptr, int64_t *vol, uint32_t cap);

/* rp_op_prep without the overlap check, for a check_fn: it
 * runs before every replay for the per-replay argument bytes, and the
 * instances, checked when the task itself ran, do not change between
 * replays (the check sorts the accesses' byte ranges: gpt.adamw's
 * hundreds of them each time would add to every replay's host time). */
rp_status rp_op_prep_args(const rp_op *op, const rp_task_ctx *ctx, void *args,
                          void **ptr, int64_t *vol, uint32_t cap);

/* rp_op_prep's checks run at launch (the engine runs it on every launch,
 * recorded launch, builder call, graph load and instantiate's validation
 * of a task registered with op, before anything runs or is recorded):
 * ctx holds the launch's args and its accesses' instances (their layout:
 * rect, element type, strides, storage; no other member is read), and
 * interps the launch's interpolations, whose values a replay writes into
 * the args later. Every check is the body's, with its status and detail,
 * except those that read a field an interpolation writes (its range, an
 * access's count or its `when`; a group count one writes leaves the
 * head's accesses only), and when any interpolation writes the args:
 * check_args (it may read any field), the overlap check and check_ptrs
 * (they compare storage). check_ptrs also waits for the run when an
 * access has no storage (a model's instances). The task's own
 * rp_op_prep still checks everything when it runs. Allocates the args'
 * copy (RP_ENOMEM when it cannot); takes no lock. */
rp_status rp_op_check_launch(const rp_op *op, const rp_task_ctx *ctx,
                             const rp_interp *interps, uint32_t ninterp);

/* The first statement of a task body of a fixed-access op (the `ctx`
 * parameter in scope): declares `a`, the args copy (of type `type`), `p`,
 * the n access pointers, and `st`, and returns the check's error. */
#define RP_OP_PREP(op, type, n)                                                \
  type a;                                                                      \
  void *p[n];                                                                  \
  rp_status st = rp_op_prep(&(op), ctx, &a, p, NULL, n);                       \
  if (st != RP_OK)                                                             \
  return st

/* The kernel tasks' descriptors, rp_task_BODY_op for every line of
 * RP_KERNEL_TASKS (kernels/tasks.h): the rp.* ones in kernels/tasks.c,
 * the gpt.* ones in kernels/gpt_tasks.c. */
#define RP_KT_OP_(id, body, flags, check_fn)                                   \
  extern const rp_op rp_task_##body##_op;
RP_KERNEL_TASKS(RP_KT_OP_)
#undef RP_KT_OP_

/* The descriptor of the kernel task registered as `name`, or NULL. */
const rp_op *rp_kernel_op(const char *name);

#endif
