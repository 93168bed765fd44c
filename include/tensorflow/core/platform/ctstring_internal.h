/* tensorflow/core/platform/ctstring_internal.h: the layout of TF_TString and its inline
 * functions, with TensorFlow 2.21's layout, enumerator values and function names, so that
 * string tensors cross between a plugin, pluggable and TensorFlow unchanged.
 *
 * A TF_TString is 24 bytes in one of four forms, told apart by the two low bits of its first
 * byte (TF_TString_Type):
 *   small  - up to TF_TString_SmallCapacity bytes stored inline, NUL-terminated; the first
 *            byte is (size << 2);
 *   large  - heap memory (malloc) the string owns: size (shifted left by 2, type in the low
 *            bits, little-endian), capacity, pointer; NUL-terminated;
 *   offset - bytes at `offset` from the TF_TString itself (serialized tensors); not owned;
 *   view   - borrowed bytes, optionally kept alive by a reference-counted owner.
 * The bit twiddling assumes size_t is stored little-endian, as on every platform pluggable
 * builds for; big-endian hosts get the equivalent encoding in the high byte. */
#ifndef TENSORFLOW_CORE_PLATFORM_CTSTRING_INTERNAL_H_
#define TENSORFLOW_CORE_PLATFORM_CTSTRING_INTERNAL_H_

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
     __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_WIN32)
#define TF_TSTRING_LITTLE_ENDIAN 1
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TF_TSTRING_LITTLE_ENDIAN 0
#else
#error "TF_TString needs to know the byte order of this platform"
#endif

/* Reverses the bytes of a 32-bit word (offset strings store little-endian words). */
static inline uint32_t TF_swap32(uint32_t host_int) {
  return ((host_int & 0xFFu) << 24) | ((host_int & 0xFF00u) << 8) |
         ((host_int >> 8) & 0xFF00u) | (host_int >> 24);
}

#if TF_TSTRING_LITTLE_ENDIAN
#define TF_le32toh(x) x
#else
#define TF_le32toh(x) TF_swap32(x)
#endif

/* Rounds up to a multiple of 16. */
static inline size_t TF_align16(size_t i) { return (i + 0xF) & ~(size_t)0xF; }
static inline size_t TF_max(size_t a, size_t b) { return a < b ? b : a; }
static inline size_t TF_min(size_t a, size_t b) { return a < b ? a : b; }

typedef enum TF_TString_Type {
  TF_TSTR_SMALL = 0x00,
  TF_TSTR_LARGE = 0x01,
  TF_TSTR_OFFSET = 0x02,
  TF_TSTR_VIEW = 0x03,
  TF_TSTR_TYPE_MASK = 0x03
} TF_TString_Type;

struct TStringOwnerCApi;

typedef void (*tstring_owner_ref_t)(struct TStringOwnerCApi *self);
typedef bool (*tstring_owner_unref_t)(struct TStringOwnerCApi *self);

/* Keeps the bytes of a view alive: `ref` when a view is made, `unref` when it is dropped. */
typedef struct TStringOwnerCApi {
  tstring_owner_ref_t ref;
  tstring_owner_unref_t unref;
  void *obj;
} TStringOwnerCApi;

typedef struct TF_TString_Large {
  size_t size; /* (size << 2) | TF_TSTR_LARGE */
  size_t cap;  /* bytes available, not counting the NUL */
  char *ptr;
} TF_TString_Large;

typedef struct TF_TString_Offset {
  uint32_t size;   /* (size << 2) | TF_TSTR_OFFSET, little-endian */
  uint32_t offset; /* from the start of this TF_TString, little-endian */
  uint32_t count;
} TF_TString_Offset;

typedef struct TF_TString_View {
  size_t size; /* (size << 2) | TF_TSTR_VIEW */
  const char *ptr;
  TStringOwnerCApi *owner_ref; /* NULL: the bytes outlive the string by contract */
} TF_TString_View;

typedef struct TF_TString_Raw {
  uint8_t raw[24];
} TF_TString_Raw;

typedef union TF_TString_Union {
  TF_TString_Large large;
  TF_TString_Offset offset;
  TF_TString_View view;
  TF_TString_Raw raw;
} TF_TString_Union;

enum {
  /* 24 bytes, less the size byte and the NUL. */
  TF_TString_SmallCapacity = (sizeof(TF_TString_Union) - sizeof(char) - sizeof(uint8_t)),
};

typedef struct TF_TString_Small {
  uint8_t size; /* (size << 2) | TF_TSTR_SMALL */
  char str[TF_TString_SmallCapacity + sizeof(char)];
} TF_TString_Small;

/* The element itself: one of the forms above, told apart by TF_TString_GetType. */
struct TF_TString {
  union {
    TF_TString_Small smll;
    TF_TString_Large large;
    TF_TString_Offset offset;
    TF_TString_View view;
    TF_TString_Raw raw;
  } u;
};
typedef struct TF_TString TF_TString;

static inline TF_TString_Type TF_TString_GetType(const TF_TString *str) {
  return (TF_TString_Type)(str->u.raw.raw[0] & TF_TSTR_TYPE_MASK);
}

/* The size a large or view string stores, back to a byte count. */
static inline size_t TF_TString_ToActualSizeT(size_t size) {
#if TF_TSTRING_LITTLE_ENDIAN
  return size >> 2;
#else
  const size_t top = ~((~(size_t)0) >> 8);
  return (((top << 2) & size) >> 2) | (~top & size);
#endif
}

/* A byte count as a large or view string stores it, with its type in the first byte. */
static inline size_t TF_TString_ToInternalSizeT(size_t size, TF_TString_Type type) {
#if TF_TSTRING_LITTLE_ENDIAN
  return (size << 2) | type;
#else
  const size_t top = ~((~(size_t)0) >> 8);
  return (top & (size << 2)) | (~top & size) | ((size_t)type << ((sizeof(size_t) - 1) * 8));
#endif
}

static inline void TF_TString_Init(TF_TString *str) {
  memset(str->u.raw.raw, 0, sizeof(TF_TString_Raw));
}

/* Frees owned memory or drops the owner of a view; the string is then empty. */
static inline void TF_TString_Dealloc(TF_TString *str) {
  TF_TString_Type type = TF_TString_GetType(str);
  if (type == TF_TSTR_LARGE && str->u.large.ptr != NULL) {
    free(str->u.large.ptr);
    TF_TString_Init(str);
  } else if (type == TF_TSTR_VIEW && str->u.view.owner_ref != NULL) {
    (void)str->u.view.owner_ref->unref(str->u.view.owner_ref);
    TF_TString_Init(str);
  }
}

static inline size_t TF_TString_GetSize(const TF_TString *str) {
  switch (TF_TString_GetType(str)) {
    case TF_TSTR_SMALL:
      return str->u.smll.size >> 2;
    case TF_TSTR_LARGE:
      return TF_TString_ToActualSizeT(str->u.large.size);
    case TF_TSTR_OFFSET:
      return TF_le32toh(str->u.offset.size) >> 2;
    case TF_TSTR_VIEW:
      return TF_TString_ToActualSizeT(str->u.view.size);
    default:
      return 0;
  }
}

static inline size_t TF_TString_GetCapacity(const TF_TString *str) {
  switch (TF_TString_GetType(str)) {
    case TF_TSTR_SMALL:
      return TF_TString_SmallCapacity;
    case TF_TSTR_LARGE:
      return str->u.large.cap;
    default:
      return 0; /* offsets and views own nothing */
  }
}

static inline const char *TF_TString_GetDataPointer(const TF_TString *str) {
  switch (TF_TString_GetType(str)) {
    case TF_TSTR_SMALL:
      return str->u.smll.str;
    case TF_TSTR_LARGE:
      return str->u.large.ptr;
    case TF_TSTR_OFFSET:
      return (const char *)str + TF_le32toh(str->u.offset.offset);
    case TF_TSTR_VIEW:
      return str->u.view.ptr;
    default:
      return NULL;
  }
}

/* Makes the string `new_size` bytes long, keeping the first min(old, new) bytes and leaving
 * the rest unset; the result is small or large (owned) whatever the form before. */
static inline char *TF_TString_ResizeUninitialized(TF_TString *str, size_t new_size) {
  size_t old_size = TF_TString_GetSize(str);
  size_t keep = TF_min(new_size, old_size);
  TF_TString_Type old_type = TF_TString_GetType(str);
  const char *old_ptr = TF_TString_GetDataPointer(str);
  TStringOwnerCApi *old_owner = old_type == TF_TSTR_VIEW ? str->u.view.owner_ref : NULL;

  if (new_size <= TF_TString_SmallCapacity) {
    /* Save the bytes first: a large or view string's pointer sits where they go. */
    char saved[TF_TString_SmallCapacity + 1];
    if (old_type != TF_TSTR_SMALL && keep) memcpy(saved, old_ptr, keep);
    if (old_type == TF_TSTR_LARGE) free((void *)old_ptr);
    else if (old_owner != NULL) old_owner->unref(old_owner);
    str->u.smll.size = (uint8_t)((new_size << 2) | TF_TSTR_SMALL);
    if (old_type != TF_TSTR_SMALL && keep) memcpy(str->u.smll.str, saved, keep);
    str->u.smll.str[new_size] = '\0';
    return str->u.smll.str;
  }

  size_t old_cap = TF_TString_GetCapacity(str);
  size_t new_cap;
  if (new_size < old_size && new_size < old_cap / 2) new_cap = TF_align16(old_cap / 2 + 1) - 1;
  else if (new_size > old_cap) new_cap = TF_align16(new_size + 1) - 1;
  else new_cap = old_cap;

  char *ptr;
  if (new_cap == old_cap) {
    ptr = str->u.large.ptr;
  } else if (old_type == TF_TSTR_LARGE) {
    ptr = (char *)realloc(str->u.large.ptr, new_cap + 1);
  } else {
    ptr = (char *)malloc(new_cap + 1);
    if (keep) memcpy(ptr, old_ptr, keep);
    if (old_owner != NULL) (void)old_owner->unref(old_owner);
  }
  str->u.large.size = TF_TString_ToInternalSizeT(new_size, TF_TSTR_LARGE);
  str->u.large.ptr = ptr;
  str->u.large.ptr[new_size] = '\0';
  str->u.large.cap = new_cap;
  return str->u.large.ptr;
}

/* Writable bytes: offsets and views are first copied into memory the string owns. */
static inline char *TF_TString_GetMutableDataPointer(TF_TString *str) {
  switch (TF_TString_GetType(str)) {
    case TF_TSTR_SMALL:
      return str->u.smll.str;
    case TF_TSTR_LARGE:
      return str->u.large.ptr;
    case TF_TSTR_OFFSET:
    case TF_TSTR_VIEW:
      TF_TString_ResizeUninitialized(str, TF_TString_GetSize(str));
      return TF_TString_GetType(str) == TF_TSTR_SMALL ? str->u.smll.str : str->u.large.ptr;
    default:
      return NULL;
  }
}

/* Room for at least `new_cap` bytes without reallocating. */
static inline void TF_TString_Reserve(TF_TString *str, size_t new_cap) {
  TF_TString_Type type = TF_TString_GetType(str);
  if (new_cap <= TF_TString_SmallCapacity) return;
  if (type == TF_TSTR_LARGE && new_cap <= str->u.large.cap) return;
  size_t size = TF_TString_GetSize(str);
  const char *old_ptr = TF_TString_GetDataPointer(str);
  new_cap = TF_align16(TF_max(new_cap, size) + 1) - 1;
  if (type == TF_TSTR_LARGE) {
    str->u.large.ptr = (char *)realloc(str->u.large.ptr, new_cap + 1);
  } else {
    char *ptr = (char *)malloc(new_cap + 1);
    memcpy(ptr, old_ptr, size);
    if (type == TF_TSTR_VIEW && str->u.view.owner_ref != NULL) {
      (void)str->u.view.owner_ref->unref(str->u.view.owner_ref);
    }
    str->u.large.size = TF_TString_ToInternalSizeT(size, TF_TSTR_LARGE);
    str->u.large.ptr = ptr;
    str->u.large.ptr[size] = '\0';
  }
  str->u.large.cap = new_cap;
}

/* Reserve, at least doubling the capacity (for repeated appends). */
static inline void TF_TString_ReserveAmortized(TF_TString *str, size_t new_cap) {
  size_t cap = TF_TString_GetCapacity(str);
  if (new_cap > cap) TF_TString_Reserve(str, new_cap > 2 * cap ? new_cap : 2 * cap);
}

/* Resizes, filling new bytes with `c`. */
static inline char *TF_TString_Resize(TF_TString *str, size_t new_size, char c) {
  size_t old_size = TF_TString_GetSize(str);
  char *bytes = TF_TString_ResizeUninitialized(str, new_size);
  if (new_size > old_size) memset(bytes + old_size, c, new_size - old_size);
  return bytes;
}

static inline void TF_TString_AssignViewWithOwner(TF_TString *dst, const char *src,
                                                  size_t size, TStringOwnerCApi *owner_ref) {
  if (owner_ref != NULL) owner_ref->ref(owner_ref); /* first: dst may hold the same owner */
  TF_TString_Dealloc(dst);
  dst->u.view.size = TF_TString_ToInternalSizeT(size, TF_TSTR_VIEW);
  dst->u.view.ptr = src;
  dst->u.view.owner_ref = owner_ref;
}

static inline void TF_TString_AssignView(TF_TString *dst, const char *src, size_t size) {
  TF_TString_AssignViewWithOwner(dst, src, size, NULL);
}

static inline void TF_TString_AppendN(TF_TString *dst, const char *src, size_t src_size) {
  if (!src_size) return;
  size_t size = TF_TString_GetSize(dst);
  TF_TString_ReserveAmortized(dst, size + src_size);
  char *bytes = TF_TString_ResizeUninitialized(dst, size + src_size);
  memcpy(bytes + size, src, src_size);
}

static inline void TF_TString_Append(TF_TString *dst, const TF_TString *src) {
  TF_TString_AppendN(dst, TF_TString_GetDataPointer(src), TF_TString_GetSize(src));
}

/* `dst` becomes an owned copy of `size` bytes at `src`. */
static inline void TF_TString_Copy(TF_TString *dst, const char *src, size_t size) {
  char *bytes = TF_TString_ResizeUninitialized(dst, size);
  if (size) memcpy(bytes, src, size);
}

/* `dst` becomes equal to `src`: small strings and views are copied as they are (a view's
 * owner gains a reference), large strings are deep-copied, offsets become views. */
static inline void TF_TString_Assign(TF_TString *dst, const TF_TString *src) {
  if (dst == src) return;
  switch (TF_TString_GetType(src)) {
    case TF_TSTR_SMALL:
      TF_TString_Dealloc(dst);
      *dst = *src;
      return;
    case TF_TSTR_VIEW:
      TF_TString_Dealloc(dst);
      *dst = *src;
      if (dst->u.view.owner_ref != NULL) dst->u.view.owner_ref->ref(dst->u.view.owner_ref);
      return;
    case TF_TSTR_LARGE:
      TF_TString_Dealloc(dst);
      TF_TString_Copy(dst, TF_TString_GetDataPointer(src), TF_TString_GetSize(src));
      return;
    case TF_TSTR_OFFSET:
      TF_TString_AssignView(dst, TF_TString_GetDataPointer(src), TF_TString_GetSize(src));
      return;
    default:
      return;
  }
}

/* `dst` takes over `src`'s contents and `src` is left empty; an offset string (which owns
 * nothing) becomes a view of the same bytes. */
static inline void TF_TString_Move(TF_TString *dst, TF_TString *src) {
  if (dst == src) return;
  TF_TString_Dealloc(dst);
  switch (TF_TString_GetType(src)) {
    case TF_TSTR_SMALL:
      *dst = *src;
      return;
    case TF_TSTR_VIEW:
    case TF_TSTR_LARGE:
      *dst = *src;
      TF_TString_Init(src);
      return;
    case TF_TSTR_OFFSET:
      TF_TString_AssignView(dst, TF_TString_GetDataPointer(src), TF_TString_GetSize(src));
      return;
    default:
      return;
  }
}

#endif
