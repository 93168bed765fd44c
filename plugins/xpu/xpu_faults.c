/* xpu_faults.c: fault injection and the run-time test controls of xpu_control.h.
 *
 * A fault spec lists, per kind of call, which calls fail: `kind:N` fails the N-th call
 * (1-based) counted since the spec was installed, `kind` fails every call. Several entries may
 * name the same kind ("allocate:1,allocate:3"). The spec comes from XPU_FAIL at SE_InitPlugin
 * or from XPU_SetFaults; counters are per kind and process-wide (all devices, all threads).
 * Where each kind is counted and how its failure shows is described in README.md.
 */
#include "xpu_internal.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct XpuFaultSpec {
  bool every[XPU_FAULT_KIND_COUNT];
  uint64_t* nth[XPU_FAULT_KIND_COUNT]; /* the call numbers that fail, unsorted */
  size_t nth_count[XPU_FAULT_KIND_COUNT];
};

static const char* const kKindNames[XPU_FAULT_KIND_COUNT] = {
    "allocate",     "memcpy_htod",  "memcpy_dtoh",   "memcpy_dtod",
    "memset",       "create_stream", "create_event", "record_event",
    "host_callback", "stream",      "create_timer",  "kernel",
    "profiler_start", "profiler_collect",
};

static pthread_mutex_t g_fault_mu = PTHREAD_MUTEX_INITIALIZER;
static XpuFaultSpec* g_spec;                        /* guarded by g_fault_mu */
static uint64_t g_calls[XPU_FAULT_KIND_COUNT];      /* guarded by g_fault_mu */
static atomic_bool g_spec_active;                   /* lets calls skip the lock when no spec */
static atomic_uint_fast64_t g_stream_delay_us;
static atomic_uint_fast64_t g_inline_bytes = XPU_DEFAULT_INLINE_BYTES;
static atomic_uint_fast64_t g_invalid_frees;
static atomic_bool g_force_launch_blocking;
static _Thread_local char tl_control_error[512];

const char* xpu_fault_name(XpuFaultKind kind) {
  return (unsigned)kind < XPU_FAULT_KIND_COUNT ? kKindNames[kind] : "?";
}

void xpu_faults_free(XpuFaultSpec* spec) {
  if (spec == NULL) return;
  for (int k = 0; k < XPU_FAULT_KIND_COUNT; k++) free(spec->nth[k]);
  free(spec);
}

/* Appends "a, b, c" (the valid kinds) to `buf`, for error messages. */
static void append_kind_list(char* buf, size_t size) {
  size_t used = strlen(buf);
  for (int k = 0; k < XPU_FAULT_KIND_COUNT && used < size; k++) {
    int n = snprintf(buf + used, size - used, "%s%s", k == 0 ? "" : ", ", kKindNames[k]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* Writes "<source> entry '<entry>' is not valid: <why>; valid kinds: ..." into err. */
static void entry_error(char* err, size_t err_size, const char* source, const char* entry,
                        size_t entry_len, const char* why) {
  snprintf(err, err_size, "%s entry '%.*s' is not valid: %s; expected kind or kind:N with N >= 1"
           ", valid kinds: ", source, (int)entry_len, entry, why);
  append_kind_list(err, err_size);
}

/* Returns the kind named by [name, name + len), or -1. */
static int kind_from_name(const char* name, size_t len) {
  for (int k = 0; k < XPU_FAULT_KIND_COUNT; k++) {
    if (strlen(kKindNames[k]) == len && memcmp(kKindNames[k], name, len) == 0) return k;
  }
  return -1;
}

/* Parses [s, s + len) as a decimal integer >= 1; false if it is anything else. */
static bool parse_call_number(const char* s, size_t len, uint64_t* out) {
  if (len == 0 || len > 19) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (v == 0) return false;
  *out = v;
  return true;
}

/* True for the blanks tolerated around entries. */
static bool is_blank(char c) { return c == ' ' || c == '\t'; }

bool xpu_faults_parse(const char* text, const char* source, XpuFaultSpec** out, char* err,
                      size_t err_size) {
  *out = NULL;
  if (text == NULL) return true;
  const char* p = text;
  while (is_blank(*p)) p++;
  if (*p == '\0') return true;

  XpuFaultSpec* spec = calloc(1, sizeof *spec);
  if (spec == NULL) {
    snprintf(err, err_size, "%s: out of memory", source);
    return false;
  }

  const char* entry = text;
  for (;;) {
    const char* end = strchr(entry, ',');
    if (end == NULL) end = entry + strlen(entry);
    const char* a = entry;
    const char* b = end;
    while (a < b && is_blank(*a)) a++;
    while (b > a && is_blank(b[-1])) b--;
    const char* colon = memchr(a, ':', (size_t)(b - a));
    const char* name_end = colon != NULL ? colon : b;
    int kind = kind_from_name(a, (size_t)(name_end - a));
    if (a == b) {
      entry_error(err, err_size, source, a, 0, "empty entry");
      xpu_faults_free(spec);
      return false;
    }
    if (kind < 0) {
      char why[128];
      snprintf(why, sizeof why, "unknown kind '%.*s'", (int)(name_end - a), a);
      entry_error(err, err_size, source, a, (size_t)(b - a), why);
      xpu_faults_free(spec);
      return false;
    }
    if (colon == NULL) {
      spec->every[kind] = true;
    } else {
      uint64_t n;
      if (!parse_call_number(colon + 1, (size_t)(b - colon - 1), &n)) {
        entry_error(err, err_size, source, a, (size_t)(b - a),
                    "N must be a decimal call number >= 1");
        xpu_faults_free(spec);
        return false;
      }
      uint64_t* grown = realloc(spec->nth[kind], (spec->nth_count[kind] + 1) * sizeof(uint64_t));
      if (grown == NULL) {
        snprintf(err, err_size, "%s: out of memory", source);
        xpu_faults_free(spec);
        return false;
      }
      spec->nth[kind] = grown;
      grown[spec->nth_count[kind]++] = n;
    }
    if (*end == '\0') break;
    entry = end + 1;
  }
  *out = spec;
  return true;
}

void xpu_faults_install(XpuFaultSpec* spec) {
  pthread_mutex_lock(&g_fault_mu);
  XpuFaultSpec* old = g_spec;
  g_spec = spec;
  memset(g_calls, 0, sizeof g_calls);
  atomic_store(&g_spec_active, spec != NULL);
  pthread_mutex_unlock(&g_fault_mu);
  xpu_faults_free(old);
}

uint64_t xpu_fault_hit(XpuFaultKind kind) {
  if (!atomic_load(&g_spec_active) || (unsigned)kind >= XPU_FAULT_KIND_COUNT) return 0;
  uint64_t failing = 0;
  pthread_mutex_lock(&g_fault_mu);
  if (g_spec != NULL) {
    uint64_t call = ++g_calls[kind];
    bool fail = g_spec->every[kind];
    for (size_t i = 0; !fail && i < g_spec->nth_count[kind]; i++) fail = g_spec->nth[kind][i] == call;
    if (fail) failing = call;
  }
  pthread_mutex_unlock(&g_fault_mu);
  return failing;
}

void xpu_fault_status(TF_Status* status, XpuFaultKind kind, uint64_t call, const char* fn) {
  xpu_status(status, TF_INTERNAL, "%s: injected fault (XPU fault kind '%s', call #%" PRIu64 ")",
             fn, xpu_fault_name(kind), call);
}

bool xpu_parse_whole(const char* text, uint64_t max, uint64_t* out) {
  uint64_t v = 0;
  if (*text == '\0') return false;
  for (const char* p = text; *p != '\0'; p++) {
    if (*p < '0' || *p > '9') return false;
    uint64_t digit = (uint64_t)(*p - '0');
    if (v > (max - digit) / 10) return false; /* v * 10 + digit > max, without overflow */
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

/* xpu_parse_whole with the message of a setting of `unit`s. */
static bool parse_setting(const char* variable, const char* unit, const char* text,
                          uint64_t max, uint64_t* out, char* err, size_t err_size) {
  if (xpu_parse_whole(text, max, out)) return true;
  snprintf(err, err_size,
           "%s='%s' is not valid: expected a whole number of %s from 0 to %" PRIu64, variable,
           text, unit, max);
  return false;
}

bool xpu_parse_stream_delay(const char* text, uint64_t* out, char* err, size_t err_size) {
  return parse_setting("XPU_STREAM_DELAY_US", "microseconds", text, XPU_MAX_STREAM_DELAY_US,
                       out, err, err_size);
}

bool xpu_parse_inline_bytes(const char* text, uint64_t* out, char* err, size_t err_size) {
  return parse_setting("XPU_INLINE_BYTES", "bytes", text, XPU_MAX_INLINE_BYTES, out, err,
                       err_size);
}

uint64_t xpu_inline_max_bytes(void) { return (uint64_t)atomic_load(&g_inline_bytes); }

uint64_t xpu_stream_delay_us(void) { return (uint64_t)atomic_load(&g_stream_delay_us); }

bool xpu_launch_blocking_forced(void) { return atomic_load(&g_force_launch_blocking); }

void xpu_count_invalid_free(void) { atomic_fetch_add(&g_invalid_frees, 1); }

/* ---- exported test controls ------------------------------------------------------------- */

int XPU_SetFaults(const char* spec) {
  XpuFaultSpec* parsed = NULL;
  tl_control_error[0] = '\0';
  if (!xpu_faults_parse(spec, "XPU_SetFaults", &parsed, tl_control_error,
                        sizeof tl_control_error)) {
    return -1;
  }
  xpu_faults_install(parsed);
  return 0;
}

const char* XPU_LastControlError(void) { return tl_control_error; }

void XPU_SetInlineBytes(uint64_t bytes) {
  tl_control_error[0] = '\0';
  if (bytes > XPU_MAX_INLINE_BYTES) bytes = XPU_MAX_INLINE_BYTES;
  atomic_store(&g_inline_bytes, bytes);
}

void XPU_SetStreamDelayUs(uint64_t us) {
  tl_control_error[0] = '\0';
  if (us > XPU_MAX_STREAM_DELAY_US) us = XPU_MAX_STREAM_DELAY_US;
  atomic_store(&g_stream_delay_us, us);
}

void XPU_SetLaunchBlocking(int blocking) {
  tl_control_error[0] = '\0';
  atomic_store(&g_force_launch_blocking, blocking != 0);
}

uint64_t XPU_InvalidFreeCount(void) { return (uint64_t)atomic_load(&g_invalid_frees); }
