// Run-time values to template arguments in the attention launchers (host code), the way
// FlashAttention-3's static_switch.h does it: each macro calls its last argument, a lambda, with
// NAME a compile-time constant (or, for HK_TILE_SWITCH, a type) equal to the value, and evaluates
// to what the lambda returns. One call site then names every instantiation:
//
//   return HK_DTYPE_SWITCH(p.dtype, BF16, [&] {
//       return HK_HEAD_DIM_SWITCH(p.d, D, [&] { return launch<BF16, D>(p, st); });
//   });
//
// The lambda is a macro argument (__VA_ARGS__) so that it may hold commas. Arguments are checked
// before dispatch (hk_attn_prefill_cuda); a value outside a macro's set takes its last case.
#ifndef HK_ATTN_DISPATCH_H
#define HK_ATTN_DISPATCH_H

#include <stddef.h>

#include <tuple>
#include <utility>

#include "hk_attention.h"

// NAME = (COND), a bool.
#define HK_BOOL_SWITCH(COND, NAME, ...)         \
    [&] {                                       \
        if (COND) {                             \
            constexpr static bool NAME = true;  \
            return __VA_ARGS__();               \
        } else {                                \
            constexpr static bool NAME = false; \
            return __VA_ARGS__();               \
        }                                       \
    }()

// NAME = true for HK_ATTN_BF16, false for HK_ATTN_FP16 (the kernels' Ty<NAME>, attn_device.cuh).
#define HK_DTYPE_SWITCH(DTYPE, NAME, ...) HK_BOOL_SWITCH((DTYPE) == HK_ATTN_BF16, NAME, __VA_ARGS__)

// NAME = the head dim: 128, else 64.
#define HK_HEAD_DIM_SWITCH(HEAD_DIM, NAME, ...) \
    [&] {                                       \
        if ((HEAD_DIM) == 128) {                \
            constexpr static int NAME = 128;    \
            return __VA_ARGS__();               \
        } else {                                \
            constexpr static int NAME = 64;     \
            return __VA_ARGS__();               \
        }                                       \
    }()

// NAME = the INDEX-th type of TILES, a std::tuple of tile structs (a list of types, never an
// object): a tile picked at run time by its number. An index past the list takes its last tile.
#define HK_TILE_SWITCH(INDEX, TILES, NAME, ...)                                  \
    hk_attn_dispatch::tile_switch<TILES>((INDEX), [&](auto tile_tag) {           \
        using NAME = typename decltype(tile_tag)::type;                         \
        return __VA_ARGS__();                                                   \
    })

namespace hk_attn_dispatch {

template <class T> struct TypeTag {
    using type = T;
};

template <class Tiles, size_t I = 0, class F>
decltype(auto) tile_switch(int index, F &&f) {
    using Tile = std::tuple_element_t<I, Tiles>;
    if constexpr (I + 1 == std::tuple_size_v<Tiles>) {
        return f(TypeTag<Tile>{});
    } else {
        if (index == (int)I) return f(TypeTag<Tile>{});
        return tile_switch<Tiles, I + 1>(index, std::forward<F>(f));
    }
}

}  // namespace hk_attn_dispatch

#endif
