/* ops.c: tensorflow/c/ops.h on the host side: op registration and shape inference.
 *
 * Registration. TF_NewOpDefinitionBuilder and its setters fill a builder; TF_RegisterOpDefinition
 * checks the specs' form ("name: rest" for every attribute, input and output; names are
 * identifiers and unique within the op), appends the op to a process-wide registry and frees
 * the builder. The Python host reads the registry (pluggable_OpRegistrationInfo), parses the
 * specs' types and attributes in full and turns each op into an op of its library
 * (src/pluggable/plugin_ops.py). Registering a name twice with the same specs is accepted
 * (a plugin loaded twice); with other specs it is TF_ALREADY_EXISTS, as in TensorFlow.
 *
 * Shape inference. pluggable_OpInferShapes runs an op's shape function over a
 * TF_ShapeInferenceContext made from the inputs' shapes (a rank of -1 is an unknown shape, a
 * dimension of -1 an unknown size) and the op's type attributes, and reports the outputs'
 * shapes the function set. Handles are small host objects the plugin frees.
 */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "tensorflow/c/ops.h"

/* ---- builders and the registry ----------------------------------------------------------- */

typedef struct PG_SpecList {
  char** items;
  int32_t count, capacity;
} PG_SpecList;

struct TF_OpDefinitionBuilder {
  char* name;
  PG_SpecList attrs, inputs, outputs;
  int32_t flags; /* PG_OP_* */
  int32_t deprecated_version;
  char* deprecation;
  void (*shape_fn)(TF_ShapeInferenceContext*, TF_Status*);
  int out_of_memory;
};

typedef struct PG_OpRegistration {
  TF_OpDefinitionBuilder* b; /* adopted */
  const char** attr_ptrs;    /* views of the lists for PG_OpInfo */
} PG_OpRegistration;

static pthread_mutex_t ops_mu = PTHREAD_MUTEX_INITIALIZER;
static PG_OpRegistration* ops;
static int64_t ops_count, ops_capacity;

/* Ops by name: an open-addressing table of indices into `ops` (-1 is an empty slot), at most
 * half full, so that registering n ops costs O(n) name comparisons rather than O(n^2).
 * `name_comparisons` counts the names each registration compared (for tests). */
static int64_t* by_name;
static int64_t by_name_capacity; /* a power of two, or 0 */
static int64_t name_comparisons;

static uint64_t name_hash(const char* name) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (const unsigned char* c = (const unsigned char*)name; *c != '\0'; c++) {
    h = (h ^ *c) * 1099511628211ULL;
  }
  return h;
}

/* The slot of `name` in `by_name`: the one holding it, or the empty one where it would go.
 * Needs ops_mu and a table with at least one empty slot. */
static int64_t name_slot(const char* name) {
  int64_t mask = by_name_capacity - 1;
  int64_t slot = (int64_t)(name_hash(name) & (uint64_t)mask);
  while (by_name[slot] >= 0) {
    name_comparisons++;
    if (strcmp(ops[by_name[slot]].b->name, name) == 0) return slot;
    slot = (slot + 1) & mask;
  }
  return slot;
}

/* Makes room for one more name (ops_mu held); false when out of host memory. */
static bool reserve_name(void) {
  if (2 * (ops_count + 1) <= by_name_capacity) return true;
  int64_t capacity = by_name_capacity ? 2 * by_name_capacity : 32;
  int64_t* table = malloc(sizeof *table * (size_t)capacity);
  if (table == NULL) return false;
  for (int64_t i = 0; i < capacity; i++) table[i] = -1;
  free(by_name);
  by_name = table;
  by_name_capacity = capacity;
  for (int64_t i = 0; i < ops_count; i++) by_name[name_slot(ops[i].b->name)] = i;
  return true;
}

int64_t pluggable_OpNameComparisons(void) {
  pthread_mutex_lock(&ops_mu);
  int64_t n = name_comparisons;
  pthread_mutex_unlock(&ops_mu);
  return n;
}

static char* dup_string(const char* s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char* copy = malloc(n);
  if (copy != NULL) memcpy(copy, s, n);
  return copy;
}

static void spec_add(TF_OpDefinitionBuilder* b, PG_SpecList* list, const char* spec) {
  if (b == NULL) return;
  if (list->count == list->capacity) {
    int32_t capacity = list->capacity ? 2 * list->capacity : 4;
    char** items = realloc(list->items, sizeof(char*) * (size_t)capacity);
    if (items == NULL) {
      b->out_of_memory = 1;
      return;
    }
    list->items = items;
    list->capacity = capacity;
  }
  char* copy = dup_string(spec != NULL ? spec : "");
  if (copy == NULL) {
    b->out_of_memory = 1;
    return;
  }
  list->items[list->count++] = copy;
}

static void spec_free(PG_SpecList* list) {
  for (int32_t i = 0; i < list->count; i++) free(list->items[i]);
  free(list->items);
}

TF_OpDefinitionBuilder* TF_NewOpDefinitionBuilder(const char* op_name) {
  TF_OpDefinitionBuilder* b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->name = dup_string(op_name != NULL ? op_name : "");
  if (b->name == NULL) {
    free(b);
    return NULL;
  }
  return b;
}

void TF_DeleteOpDefinitionBuilder(TF_OpDefinitionBuilder* builder) {
  if (builder == NULL) return;
  free(builder->name);
  free(builder->deprecation);
  spec_free(&builder->attrs);
  spec_free(&builder->inputs);
  spec_free(&builder->outputs);
  free(builder);
}

void TF_OpDefinitionBuilderAddAttr(TF_OpDefinitionBuilder* builder, const char* attr_spec) {
  if (builder != NULL) spec_add(builder, &builder->attrs, attr_spec);
}

void TF_OpDefinitionBuilderAddInput(TF_OpDefinitionBuilder* builder, const char* input_spec) {
  if (builder != NULL) spec_add(builder, &builder->inputs, input_spec);
}

void TF_OpDefinitionBuilderAddOutput(TF_OpDefinitionBuilder* builder, const char* output_spec) {
  if (builder != NULL) spec_add(builder, &builder->outputs, output_spec);
}

static void set_flag(TF_OpDefinitionBuilder* b, int32_t flag, bool on) {
  if (b == NULL) return;
  if (on) b->flags |= flag;
  else b->flags &= ~flag;
}

void TF_OpDefinitionBuilderSetIsCommutative(TF_OpDefinitionBuilder* builder, bool v) {
  set_flag(builder, PG_OP_COMMUTATIVE, v);
}

void TF_OpDefinitionBuilderSetIsAggregate(TF_OpDefinitionBuilder* builder, bool v) {
  set_flag(builder, PG_OP_AGGREGATE, v);
}

void TF_OpDefinitionBuilderSetIsStateful(TF_OpDefinitionBuilder* builder, bool v) {
  set_flag(builder, PG_OP_STATEFUL, v);
}

void TF_OpDefinitionBuilderSetAllowsUninitializedInput(TF_OpDefinitionBuilder* builder, bool v) {
  set_flag(builder, PG_OP_ALLOWS_UNINITIALIZED_INPUT, v);
}

void TF_OpDefinitionBuilderDeprecated(TF_OpDefinitionBuilder* builder, int version,
                                      const char* explanation) {
  if (builder == NULL) return;
  builder->deprecated_version = version;
  free(builder->deprecation);
  builder->deprecation = dup_string(explanation != NULL ? explanation : "");
  if (builder->deprecation == NULL) builder->out_of_memory = 1;
}

void TF_OpDefinitionBuilderSetShapeInferenceFunction(
    TF_OpDefinitionBuilder* builder,
    void (*shape_inference_func)(TF_ShapeInferenceContext* ctx, TF_Status* status)) {
  if (builder != NULL) builder->shape_fn = shape_inference_func;
}

/* Length of the identifier at `s` (letters, digits, '_'; not starting with a digit). */
static size_t identifier_length(const char* s) {
  size_t n = 0;
  if (!isalpha((unsigned char)s[0]) && s[0] != '_') return 0;
  while (isalnum((unsigned char)s[n]) || s[n] == '_') n++;
  return n;
}

/* Checks that every spec of `list` reads "name: something" with a fresh name; on failure
 * sets `status` naming the op, the spec and the rule. */
static bool check_specs(const TF_OpDefinitionBuilder* b, const PG_SpecList* list,
                        const char* what, const PG_SpecList** seen, int num_seen,
                        TF_Status* status) {
  char message[600];
  for (int32_t i = 0; i < list->count; i++) {
    const char* spec = list->items[i];
    while (isspace((unsigned char)*spec)) spec++;
    size_t n = identifier_length(spec);
    const char* rest = spec + n;
    while (isspace((unsigned char)*rest)) rest++;
    const char* after = rest + 1;
    while (*rest == ':' && isspace((unsigned char)*after)) after++;
    if (n == 0 || *rest != ':' || *after == '\0') {
      snprintf(message, sizeof message,
               "TF_RegisterOpDefinition: op '%s': %s spec '%s' must read 'name: %s'", b->name,
               what, list->items[i], strcmp(what, "attribute") == 0 ? "kind [= default]" : "type");
      TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
      return false;
    }
    /* The name must not repeat among attributes, inputs and outputs. */
    for (int l = 0; l < num_seen; l++) {
      const PG_SpecList* other = seen[l];
      int32_t limit = other == list ? i : other->count;
      for (int32_t j = 0; j < limit; j++) {
        const char* o = other->items[j];
        while (isspace((unsigned char)*o)) o++;
        if (identifier_length(o) == n && strncmp(o, spec, n) == 0) {
          snprintf(message, sizeof message,
                   "TF_RegisterOpDefinition: op '%s': the name '%.*s' is used twice", b->name,
                   (int)n, spec);
          TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
          return false;
        }
      }
    }
  }
  return true;
}

static bool same_specs(const PG_SpecList* a, const PG_SpecList* b) {
  if (a->count != b->count) return false;
  for (int32_t i = 0; i < a->count; i++) {
    if (strcmp(a->items[i], b->items[i]) != 0) return false;
  }
  return true;
}

void TF_RegisterOpDefinition(TF_OpDefinitionBuilder* builder, TF_Status* status) {
  char message[600];
  TF_SetStatus(status, TF_OK, "");
  if (builder == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_RegisterOpDefinition: builder is NULL");
    return;
  }
  const PG_SpecList* lists[3] = {&builder->attrs, &builder->inputs, &builder->outputs};
  if (builder->out_of_memory) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_RegisterOpDefinition: out of host memory");
    goto fail;
  }
  if (identifier_length(builder->name) == 0 || builder->name[identifier_length(builder->name)]) {
    snprintf(message, sizeof message,
             "TF_RegisterOpDefinition: '%s' is not a valid op name (letters, digits and '_', "
             "starting with a letter)", builder->name);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    goto fail;
  }
  if (!check_specs(builder, &builder->attrs, "attribute", lists, 1, status) ||
      !check_specs(builder, &builder->inputs, "input", lists, 2, status) ||
      !check_specs(builder, &builder->outputs, "output", lists, 3, status)) {
    goto fail;
  }
  pthread_mutex_lock(&ops_mu);
  if (!reserve_name()) {
    pthread_mutex_unlock(&ops_mu);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_RegisterOpDefinition: out of host memory");
    goto fail;
  }
  int64_t slot = name_slot(builder->name);
  if (by_name[slot] >= 0) {
    const TF_OpDefinitionBuilder* other = ops[by_name[slot]].b;
    bool same = same_specs(&other->attrs, &builder->attrs) &&
                same_specs(&other->inputs, &builder->inputs) &&
                same_specs(&other->outputs, &builder->outputs);
    pthread_mutex_unlock(&ops_mu);
    if (!same) {
      snprintf(message, sizeof message,
               "TF_RegisterOpDefinition: op '%s' is already registered with other inputs, "
               "outputs or attributes", builder->name);
      TF_SetStatus(status, TF_ALREADY_EXISTS, message);
    }
    goto fail; /* the same op again: nothing to add */
  }
  if (ops_count == ops_capacity) {
    int64_t capacity = ops_capacity ? 2 * ops_capacity : 16;
    PG_OpRegistration* grown = realloc(ops, sizeof *ops * (size_t)capacity);
    if (grown == NULL) {
      pthread_mutex_unlock(&ops_mu);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_RegisterOpDefinition: out of host memory");
      goto fail;
    }
    ops = grown;
    ops_capacity = capacity;
  }
  ops[ops_count].b = builder;
  ops[ops_count].attr_ptrs = NULL;
  by_name[slot] = ops_count;
  ops_count++;
  pthread_mutex_unlock(&ops_mu);
  return;
fail:
  TF_DeleteOpDefinitionBuilder(builder);
}

int64_t pluggable_OpRegistrationCount(void) {
  pthread_mutex_lock(&ops_mu);
  int64_t n = ops_count;
  pthread_mutex_unlock(&ops_mu);
  return n;
}

static const TF_OpDefinitionBuilder* op_get(int64_t id) {
  pthread_mutex_lock(&ops_mu);
  const TF_OpDefinitionBuilder* b = id >= 0 && id < ops_count ? ops[id].b : NULL;
  pthread_mutex_unlock(&ops_mu);
  return b;
}

int pluggable_OpRegistrationInfo(int64_t id, PG_OpInfo* info) {
  const TF_OpDefinitionBuilder* b = op_get(id);
  if (b == NULL || info == NULL) return -1;
  info->name = b->name;
  info->num_attrs = b->attrs.count;
  info->attrs = (const char* const*)b->attrs.items;
  info->num_inputs = b->inputs.count;
  info->inputs = (const char* const*)b->inputs.items;
  info->num_outputs = b->outputs.count;
  info->outputs = (const char* const*)b->outputs.items;
  info->flags = b->flags;
  info->has_shape_fn = b->shape_fn != NULL;
  info->deprecated_version = b->deprecated_version;
  info->deprecation = b->deprecation != NULL ? b->deprecation : "";
  return 0;
}

/* ---- shape inference ---------------------------------------------------------------------- */

struct TF_ShapeHandle {
  int64_t rank; /* -1: unknown */
  int64_t* dims;
};

struct TF_DimensionHandle {
  int64_t value; /* -1: unknown */
};

struct TF_ShapeInferenceContext {
  const TF_OpDefinitionBuilder* op;
  int32_t num_inputs;
  TF_ShapeHandle* inputs;
  int32_t num_outputs;
  TF_ShapeHandle* outputs;
  bool* output_set;
  int32_t num_type_attrs;
  const char* const* type_attr_names;
  const int32_t* type_attr_values;
};

static void shape_clear(TF_ShapeHandle* h) {
  free(h->dims);
  h->dims = NULL;
  h->rank = -1;
}

/* `dst` becomes a copy of rank and dims (dims may alias dst's own); false when out of memory. */
static bool shape_assign(TF_ShapeHandle* dst, int64_t rank, const int64_t* dims) {
  int64_t* copy = NULL;
  if (rank > 0) {
    copy = malloc(sizeof(int64_t) * (size_t)rank);
    if (copy == NULL) return false;
    memcpy(copy, dims, sizeof(int64_t) * (size_t)rank);
  }
  free(dst->dims);
  dst->dims = copy;
  dst->rank = rank;
  return true;
}

TF_ShapeHandle* TF_NewShapeHandle(void) {
  TF_ShapeHandle* h = calloc(1, sizeof *h);
  if (h != NULL) h->rank = -1;
  return h;
}

void TF_DeleteShapeHandle(TF_ShapeHandle* handle) {
  if (handle == NULL) return;
  free(handle->dims);
  free(handle);
}

TF_DimensionHandle* TF_NewDimensionHandle(void) {
  TF_DimensionHandle* h = calloc(1, sizeof *h);
  if (h != NULL) h->value = -1;
  return h;
}

void TF_DeleteDimensionHandle(TF_DimensionHandle* handle) { free(handle); }

int64_t TF_ShapeInferenceContextNumInputs(TF_ShapeInferenceContext* ctx) {
  return ctx == NULL ? 0 : ctx->num_inputs;
}

static void oom(TF_Status* status, const char* what) {
  char message[160];
  snprintf(message, sizeof message, "%s: out of host memory", what);
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, message);
}

/* Checks that `i` indexes one of the `n` inputs or outputs (`kind`) and `handle` is set;
 * false with a status naming `what` otherwise. */
static bool check_index(TF_ShapeInferenceContext* ctx, const TF_ShapeHandle* handle, int i,
                        int32_t n, const char* kind, const char* what, TF_Status* status) {
  if (ctx != NULL && handle != NULL && i >= 0 && i < n) return true;
  char message[200];
  snprintf(message, sizeof message, "%s: %s %d is out of range (the op has %d)%s", what, kind,
           i, ctx == NULL ? 0 : n, handle == NULL ? ", or the handle is NULL" : "");
  TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
  return false;
}

/* `dst` becomes rank and dims, with an OK status, or out of memory naming `what`. */
static bool assign_or_fail(TF_ShapeHandle* dst, int64_t rank, const int64_t* dims,
                           const char* what, TF_Status* status) {
  if (!shape_assign(dst, rank, dims)) {
    oom(status, what);
    return false;
  }
  TF_SetStatus(status, TF_OK, "");
  return true;
}

void TF_ShapeInferenceContextGetInput(TF_ShapeInferenceContext* ctx, int i,
                                      TF_ShapeHandle* handle, TF_Status* status) {
  const char* what = "TF_ShapeInferenceContextGetInput";
  if (!check_index(ctx, handle, i, ctx == NULL ? 0 : ctx->num_inputs, "input", what, status)) {
    return;
  }
  assign_or_fail(handle, ctx->inputs[i].rank, ctx->inputs[i].dims, what, status);
}

void TF_ShapeInferenceContextSetOutput(TF_ShapeInferenceContext* ctx, int i,
                                       TF_ShapeHandle* handle, TF_Status* status) {
  const char* what = "TF_ShapeInferenceContextSetOutput";
  if (!check_index(ctx, handle, i, ctx == NULL ? 0 : ctx->num_outputs, "output", what, status)) {
    return;
  }
  if (assign_or_fail(&ctx->outputs[i], handle->rank, handle->dims, what, status)) {
    ctx->output_set[i] = true;
  }
}

TF_ShapeHandle* TF_ShapeInferenceContextScalar(TF_ShapeInferenceContext* ctx) {
  (void)ctx;
  TF_ShapeHandle* h = TF_NewShapeHandle();
  if (h != NULL) h->rank = 0;
  return h;
}

TF_ShapeHandle* TF_ShapeInferenceContextVectorFromSize(TF_ShapeInferenceContext* ctx,
                                                       size_t size) {
  (void)ctx;
  TF_ShapeHandle* h = TF_NewShapeHandle();
  int64_t dim = (int64_t)size;
  if (h != NULL && !shape_assign(h, 1, &dim)) {
    TF_DeleteShapeHandle(h);
    return NULL;
  }
  return h;
}

void TF_ShapeInferenceContext_GetAttrType(TF_ShapeInferenceContext* ctx, const char* attr_name,
                                          TF_DataType* val, TF_Status* status) {
  for (int32_t i = 0; ctx != NULL && attr_name != NULL && i < ctx->num_type_attrs; i++) {
    if (strcmp(ctx->type_attr_names[i], attr_name) == 0) {
      *val = (TF_DataType)ctx->type_attr_values[i];
      TF_SetStatus(status, TF_OK, "");
      return;
    }
  }
  char message[300];
  snprintf(message, sizeof message,
           "TF_ShapeInferenceContext_GetAttrType: op '%s' has no type attribute '%s'",
           ctx != NULL ? ctx->op->name : "?", attr_name != NULL ? attr_name : "(null)");
  TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
}

int64_t TF_ShapeInferenceContextRank(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* handle) {
  (void)ctx;
  return handle == NULL ? -1 : handle->rank;
}

int TF_ShapeInferenceContextRankKnown(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* handle) {
  (void)ctx;
  return handle != NULL && handle->rank >= 0;
}

/* The shared part of WithRank / AtLeast / AtMost: `cmp` is 0, 1 or -1. */
static void with_rank(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* handle, int64_t rank,
                      TF_ShapeHandle* result, int cmp, const char* what, TF_Status* status) {
  char message[300];
  if (handle == NULL || result == NULL) {
    snprintf(message, sizeof message, "%s: handle or result is NULL", what);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    return;
  }
  if (handle->rank < 0) { /* unknown: becomes a shape of that rank with unknown sizes */
    if (cmp == 0) {
      int64_t* dims = rank > 0 ? malloc(sizeof(int64_t) * (size_t)rank) : NULL;
      if (rank > 0 && dims == NULL) {
        oom(status, what);
        return;
      }
      for (int64_t i = 0; i < rank; i++) dims[i] = -1;
      free(result->dims);
      result->dims = dims;
      result->rank = rank;
    } else if (!shape_assign(result, -1, NULL)) {
      oom(status, what);
      return;
    }
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  bool ok = cmp == 0 ? handle->rank == rank : cmp > 0 ? handle->rank >= rank : handle->rank <= rank;
  if (!ok) {
    snprintf(message, sizeof message, "%s: op '%s': the shape must have rank %s%" PRId64
             ", but has rank %" PRId64, what, ctx != NULL ? ctx->op->name : "?",
             cmp == 0 ? "" : cmp > 0 ? "at least " : "at most ", rank, handle->rank);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    return;
  }
  if (!shape_assign(result, handle->rank, handle->dims)) {
    oom(status, what);
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

void TF_ShapeInferenceContextWithRank(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* handle,
                                      int64_t rank, TF_ShapeHandle* result, TF_Status* status) {
  with_rank(ctx, handle, rank, result, 0, "TF_ShapeInferenceContextWithRank", status);
}

void TF_ShapeInferenceContextWithRankAtLeast(TF_ShapeInferenceContext* ctx,
                                             TF_ShapeHandle* handle, int64_t rank,
                                             TF_ShapeHandle* result, TF_Status* status) {
  with_rank(ctx, handle, rank, result, 1, "TF_ShapeInferenceContextWithRankAtLeast", status);
}

void TF_ShapeInferenceContextWithRankAtMost(TF_ShapeInferenceContext* ctx,
                                            TF_ShapeHandle* handle, int64_t rank,
                                            TF_ShapeHandle* result, TF_Status* status) {
  with_rank(ctx, handle, rank, result, -1, "TF_ShapeInferenceContextWithRankAtMost", status);
}

void TF_ShapeInferenceContextDim(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* shape_handle,
                                 int64_t i, TF_DimensionHandle* result) {
  (void)ctx;
  if (result == NULL) return;
  result->value = -1;
  if (shape_handle == NULL || shape_handle->rank < 0) return;
  int64_t index = i < 0 ? i + shape_handle->rank : i;
  if (index >= 0 && index < shape_handle->rank) result->value = shape_handle->dims[index];
}

void TF_ShapeInferenceContextSubshape(TF_ShapeInferenceContext* ctx,
                                      TF_ShapeHandle* shape_handle, int64_t start, int64_t end,
                                      TF_ShapeHandle* result, TF_Status* status) {
  (void)ctx;
  if (shape_handle == NULL || result == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "TF_ShapeInferenceContextSubshape: shape_handle or result is NULL");
    return;
  }
  if (shape_handle->rank < 0) {
    if (!shape_assign(result, -1, NULL)) oom(status, "TF_ShapeInferenceContextSubshape");
    else TF_SetStatus(status, TF_OK, "");
    return;
  }
  int64_t rank = shape_handle->rank;
  int64_t s = start < 0 ? start + rank : start, e = end < 0 ? end + rank : end;
  if (s > rank) s = rank;
  if (e > rank) e = rank;
  if (s < 0 || e < 0 || s > e) {
    char message[300];
    snprintf(message, sizeof message,
             "TF_ShapeInferenceContextSubshape: [%" PRId64 ", %" PRId64 ") is not a valid "
             "range of a shape of rank %" PRId64, start, end, rank);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    return;
  }
  if (!shape_assign(result, e - s, shape_handle->dims + s)) {
    oom(status, "TF_ShapeInferenceContextSubshape");
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

void TF_ShapeInferenceContextSetUnknownShape(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  for (int32_t i = 0; ctx != NULL && i < ctx->num_outputs; i++) {
    shape_clear(&ctx->outputs[i]);
    ctx->output_set[i] = true;
  }
  TF_SetStatus(status, TF_OK, "");
}

int TF_DimensionHandleValueKnown(TF_DimensionHandle* dim_handle) {
  return dim_handle != NULL && dim_handle->value >= 0;
}

int64_t TF_DimensionHandleValue(TF_DimensionHandle* dim_handle) {
  return dim_handle == NULL ? -1 : dim_handle->value;
}

void TF_ShapeInferenceContextConcatenateShapes(TF_ShapeInferenceContext* ctx,
                                               TF_ShapeHandle* first, TF_ShapeHandle* second,
                                               TF_ShapeHandle* result, TF_Status* status) {
  (void)ctx;
  if (first == NULL || second == NULL || result == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "TF_ShapeInferenceContextConcatenateShapes: a handle is NULL");
    return;
  }
  if (first->rank < 0 || second->rank < 0) {
    if (!shape_assign(result, -1, NULL)) oom(status, "TF_ShapeInferenceContextConcatenateShapes");
    else TF_SetStatus(status, TF_OK, "");
    return;
  }
  int64_t rank = first->rank + second->rank;
  int64_t* dims = rank > 0 ? malloc(sizeof(int64_t) * (size_t)rank) : NULL;
  if (rank > 0 && dims == NULL) {
    oom(status, "TF_ShapeInferenceContextConcatenateShapes");
    return;
  }
  if (first->rank) memcpy(dims, first->dims, sizeof(int64_t) * (size_t)first->rank);
  if (second->rank) {
    memcpy(dims + first->rank, second->dims, sizeof(int64_t) * (size_t)second->rank);
  }
  free(result->dims);
  result->dims = dims;
  result->rank = rank;
  TF_SetStatus(status, TF_OK, "");
}

int pluggable_OpInferShapes(int64_t id, int32_t num_inputs, const int64_t* ranks,
                            const int64_t* dims, int32_t num_type_attrs,
                            const char* const* type_attr_names, const int32_t* type_attr_values,
                            int32_t num_outputs, int64_t* out_ranks, int64_t* out_dims,
                            int64_t out_dims_capacity, TF_Status* status) {
  const TF_OpDefinitionBuilder* op = op_get(id);
  if (op == NULL || num_inputs < 0 || num_outputs < 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_OpInferShapes: bad op id or counts");
    return TF_INVALID_ARGUMENT;
  }
  for (int32_t i = 0; i < num_outputs; i++) out_ranks[i] = PG_SHAPE_NOT_SET;
  if (op->shape_fn == NULL) {
    TF_SetStatus(status, TF_OK, "");
    return TF_OK;
  }
  TF_ShapeInferenceContext ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.op = op;
  ctx.num_inputs = num_inputs;
  ctx.num_outputs = num_outputs;
  ctx.num_type_attrs = num_type_attrs;
  ctx.type_attr_names = type_attr_names;
  ctx.type_attr_values = type_attr_values;
  ctx.inputs = calloc((size_t)num_inputs + 1, sizeof(TF_ShapeHandle));
  ctx.outputs = calloc((size_t)num_outputs + 1, sizeof(TF_ShapeHandle));
  ctx.output_set = calloc((size_t)num_outputs + 1, sizeof(bool));
  int code = TF_OK;
  if (ctx.inputs == NULL || ctx.outputs == NULL || ctx.output_set == NULL) {
    oom(status, "pluggable_OpInferShapes");
    code = TF_RESOURCE_EXHAUSTED;
    goto done;
  }
  /* Input shapes point into the caller's arrays: the plugin only ever gets copies. */
  const int64_t* d = dims;
  for (int32_t i = 0; i < num_inputs; i++) {
    ctx.inputs[i].rank = ranks[i];
    ctx.inputs[i].dims = (int64_t*)d;
    if (ranks[i] > 0) d += ranks[i];
  }
  for (int32_t i = 0; i < num_outputs; i++) ctx.outputs[i].rank = -1;
  TF_SetStatus(status, TF_OK, "");
  op->shape_fn(&ctx, status);
  code = TF_GetCode(status);
  if (code != TF_OK) goto done;
  int64_t used = 0;
  for (int32_t i = 0; i < num_outputs; i++) {
    if (!ctx.output_set[i]) continue;
    out_ranks[i] = ctx.outputs[i].rank;
    if (ctx.outputs[i].rank <= 0) continue;
    if (used + ctx.outputs[i].rank > out_dims_capacity) {
      TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_OpInferShapes: out_dims is too small");
      code = TF_INVALID_ARGUMENT;
      goto done;
    }
    memcpy(out_dims + used, ctx.outputs[i].dims, sizeof(int64_t) * (size_t)ctx.outputs[i].rank);
    used += ctx.outputs[i].rank;
  }
done:
  for (int32_t i = 0; ctx.outputs != NULL && i < num_outputs; i++) free(ctx.outputs[i].dims);
  free(ctx.inputs);
  free(ctx.outputs);
  free(ctx.output_set);
  return code;
}
