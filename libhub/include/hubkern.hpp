/* hubkern.hpp — C++17 wrapper over the C API of hubkern.h, header-only (nothing to link beyond
 * libhubkern). What it adds, and nothing else:
 *   - RAII handles with move semantics: hubkern::library (hk_init / hk_shutdown), hubkern::hub,
 *     hubkern::kernel (reference-counted: copies share the handle, as hk_kernel_ref does),
 *     hubkern::value (a call's result, released with hk_value_clear);
 *   - errors as hubkern::error (an exception carrying the hk_error code, its name and the message)
 *     or, without exceptions, hubkern::result<T> (an `expected`-style value or error);
 *   - hubkern::tensor: a DLTensor descriptor over caller memory (a pointer and a shape, or a
 *     hubkern::span), with the dtype taken from the element type.
 * Every function has a throwing form and a `try_` form returning result<T>. The threading rules
 * are the C API's (README "Threads"): a kernel may be called from any number of threads; a hub
 * handle by one thread at a time. */
#ifndef HUBKERN_HPP
#define HUBKERN_HPP

#include <hubkern.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace hubkern {

/* ---- errors -------------------------------------------------------------------------------- */

/* A failed hubkern call: the hk_error code (HK_ERR_...), its stable name and the message that says
 * what to do (hk_last_error() of the thread that failed, copied). */
class error : public std::runtime_error {
  public:
    error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
    /* The calling thread's last error, as the C API left it. */
    static error last() { return error(hk_last_error_code(), hk_last_error()); }
    int code() const noexcept { return code_; }
    const char *name() const noexcept { return hk_error_name(code_); }

  private:
    int code_;
};

/* A value or the error that prevented it (std::expected-like; C++17 has none). value() throws the
 * error; check ok() first to stay without exceptions. */
template <class T> class result {
  public:
    result(T v) : v_(std::move(v)) {}
    result(error e) : v_(std::move(e)) {}
    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }
    T &value() & {
        if (!ok()) throw std::get<1>(v_);
        return std::get<0>(v_);
    }
    T &&value() && {
        if (!ok()) throw std::get<1>(v_);
        return std::get<0>(std::move(v_));
    }
    const error &err() const {
        if (ok()) throw std::logic_error("hubkern::result::err() on a result that holds a value");
        return std::get<1>(v_);
    }

  private:
    std::variant<T, error> v_;
};

/* result<void>: success or the error. */
template <> class result<void> {
  public:
    result() = default;
    result(error e) : e_(std::move(e)), failed_(true) {}
    bool ok() const noexcept { return !failed_; }
    explicit operator bool() const noexcept { return ok(); }
    void value() const {
        if (failed_) throw e_;
    }
    const error &err() const {
        if (!failed_) throw std::logic_error("hubkern::result::err() on a successful result");
        return e_;
    }

  private:
    error e_{HK_OK, ""};
    bool failed_ = false;
};

namespace detail {
inline result<void> check(int rc) {
    if (rc == HK_OK) return {};
    return error::last();
}
} // namespace detail

/* ---- process set-up ------------------------------------------------------------------------ */

/* hk_init() for the lifetime of the object, hk_shutdown() at its end: make one at the top of
 * main(), before threads start, and let it outlive every other hubkern object. */
class library {
  public:
    library() {
        if (hk_init() != HK_OK) throw error::last();
    }
    ~library() { hk_shutdown(); }
    library(const library &) = delete;
    library &operator=(const library &) = delete;
    static const char *version() noexcept { return hk_version(); }
};

/* ---- spans and tensors ----------------------------------------------------------------------- */

/* A view of contiguous elements (std::span is C++20). */
template <class T> class span {
  public:
    constexpr span() noexcept = default;
    constexpr span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    template <class C, class = decltype(std::declval<C &>().data())>
    constexpr span(C &c) noexcept : data_(c.data()), size_(c.size()) {}
    template <std::size_t N> constexpr span(T (&a)[N]) noexcept : data_(a), size_(N) {}
    constexpr T *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }
    constexpr T *begin() const noexcept { return data_; }
    constexpr T *end() const noexcept { return data_ + size_; }

  private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
};

/* The DLPack dtype of an element type; bfloat16 / float16 have no C++17 type: give the dtype. */
template <class T> constexpr hk_dtype dtype_of() {
    using U = std::remove_cv_t<T>;
    static_assert(std::is_arithmetic_v<U> && !std::is_same_v<U, bool>,
                  "hubkern::dtype_of: give the hk_dtype for this element type explicitly");
    return hk_dtype{static_cast<uint8_t>(std::is_floating_point_v<U> ? HK_DTYPE_FLOAT
                                         : std::is_signed_v<U>       ? HK_DTYPE_INT
                                                                     : HK_DTYPE_UINT),
                    static_cast<uint8_t>(sizeof(U) * 8), 1};
}

/* A DLTensor over memory the caller owns (host or device): the data pointer, the shape and,
 * optionally, strides in elements (none: compact row-major). The object owns only its shape and
 * stride arrays, so the descriptor it hands to a call stays valid while the tensor lives. */
class tensor {
  public:
    template <class T>
    tensor(T *data, std::initializer_list<int64_t> shape, hk_device device = {HK_DEVICE_CPU, 0})
        : tensor(static_cast<void *>(const_cast<std::remove_cv_t<T> *>(data)), dtype_of<T>(),
                 std::vector<int64_t>(shape), {}, device) {}
    /* A span's elements as a tensor of that shape; the shape must cover exactly the span. */
    template <class T>
    tensor(span<T> data, std::initializer_list<int64_t> shape, hk_device device = {HK_DEVICE_CPU, 0})
        : tensor(data.data(), shape, device) {
        if (elements() != static_cast<int64_t>(data.size()))
            throw error(HK_ERR_INVALID_ARG, "hubkern::tensor: the shape does not cover the span exactly");
    }
    tensor(void *data, hk_dtype dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
           hk_device device = {HK_DEVICE_CPU, 0})
        : shape_(std::move(shape)), strides_(std::move(strides)) {
        if (!strides_.empty() && strides_.size() != shape_.size())
            throw error(HK_ERR_INVALID_ARG, "hubkern::tensor: give one stride per dimension, or none");
        t_ = hk_dltensor{data, device, static_cast<int32_t>(shape_.size()), dtype, nullptr, nullptr, 0};
        rebind();
    }
    tensor(const tensor &o) : t_(o.t_), shape_(o.shape_), strides_(o.strides_) { rebind(); }
    tensor(tensor &&o) noexcept : t_(o.t_), shape_(std::move(o.shape_)), strides_(std::move(o.strides_)) {
        rebind();
    }
    tensor &operator=(tensor o) noexcept {
        t_ = o.t_;
        shape_.swap(o.shape_);
        strides_.swap(o.strides_);
        rebind();
        return *this;
    }

    span<const int64_t> shape() const noexcept { return {shape_.data(), shape_.size()}; }
    int64_t elements() const noexcept {
        int64_t n = 1;
        for (int64_t d : shape_) n *= d;
        return n;
    }
    /* The descriptor (valid while this tensor lives, until it is assigned to). */
    hk_dltensor *dl() noexcept { return &t_; }

  private:
    void rebind() noexcept {
        t_.shape = shape_.empty() ? nullptr : shape_.data();
        t_.strides = strides_.empty() ? nullptr : strides_.data();
    }
    hk_dltensor t_;
    std::vector<int64_t> shape_, strides_;
};

/* ---- call arguments and results ------------------------------------------------------------ */

/* One argument of a call: a tensor, a number, a bool or a string, converted implicitly, so that
 * calls read k.call("rms_norm", {out, x, w, 1e-6}). Borrows what it is made from. */
class arg {
  public:
    arg(tensor &t) noexcept : v_(hk_value_tensor(t.dl())) {}
    arg(double f) noexcept : v_(hk_value_float(f)) {}
    arg(float f) noexcept : v_(hk_value_float(f)) {}
    arg(int i) noexcept : v_(hk_value_int(i)) {}
    arg(int64_t i) noexcept : v_(hk_value_int(i)) {}
    arg(bool b) noexcept : v_(hk_value_bool(b)) {}
    arg(const char *s) noexcept : v_(hk_value_string(s)) {}
    const hk_value &c() const noexcept { return v_; }

  private:
    hk_value v_;
};

/* A call's result; owns what the kernel returned (a tensor or string) until it is destroyed. */
class value {
  public:
    value() noexcept : v_(hk_value_none()) {}
    value(const value &) = delete;
    value &operator=(const value &) = delete;
    value(value &&o) noexcept : v_(o.v_) { o.v_ = hk_value_none(); }
    value &operator=(value &&o) noexcept {
        if (this != &o) {
            hk_value_clear(&v_);
            v_ = o.v_;
            o.v_ = hk_value_none();
        }
        return *this;
    }
    ~value() { hk_value_clear(&v_); }
    hk_value_kind kind() const noexcept { return v_.kind; }
    const hk_value &c() const noexcept { return v_; }
    hk_value *out() noexcept { return &v_; }

  private:
    hk_value v_;
};

/* ---- the Hub client ------------------------------------------------------------------------ */

/* An hk_hub: one thread at a time (hand it to kernel::get through options.hub, or use the options
 * alone and let each get make its own). Move-only. */
class hub {
  public:
    static result<hub> try_open(const hk_hub_options &opts) {
        hk_hub *h = nullptr;
        if (hk_hub_new(&h, &opts) != HK_OK) return error::last();
        return hub(h);
    }
    static hub open(const hk_hub_options &opts) { return try_open(opts).value(); }
    hub(hub &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    hub &operator=(hub &&o) noexcept {
        if (this != &o) {
            hk_hub_free(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    hub(const hub &) = delete;
    hub &operator=(const hub &) = delete;
    ~hub() { hk_hub_free(h_); }
    hk_hub *c() const noexcept { return h_; }
    std::string_view endpoint() const noexcept { return hk_hub_endpoint(h_); }
    std::string_view cache_root() const noexcept { return hk_hub_cache_root(h_); }

  private:
    explicit hub(hk_hub *h) noexcept : h_(h) {}
    hk_hub *h_;
};

/* ---- kernels ------------------------------------------------------------------------------- */

/* A loaded kernel. Copies share the handle (hk_kernel_ref); the library unloads it when the last
 * copy is gone, so a copy held by a running call keeps it loaded while the caller swaps in another. */
class kernel {
  public:
    /* hk_get_kernel: resolve, pull or find in the cache, verify and load. */
    static result<kernel> try_get(const hk_get_kernel_options &opts) {
        hk_kernel *k = nullptr;
        if (hk_get_kernel(&k, &opts) != HK_OK) return error::last();
        return kernel(k);
    }
    static kernel get(const hk_get_kernel_options &opts) { return try_get(opts).value(); }
    /* hk_get_local_kernel: a kernel directory on disk (opts may be null). */
    static result<kernel> try_get_local(const char *path, const hk_get_kernel_options *opts = nullptr) {
        hk_kernel *k = nullptr;
        if (hk_get_local_kernel(&k, path, opts) != HK_OK) return error::last();
        return kernel(k);
    }
    /* Adopt a handle holding one reference (as hk_get_kernel returns it). */
    static kernel adopt(hk_kernel *k) noexcept { return kernel(k); }

    kernel(const kernel &o) noexcept : k_(hk_kernel_ref(o.k_)) {}
    kernel(kernel &&o) noexcept : k_(std::exchange(o.k_, nullptr)) {}
    kernel &operator=(kernel o) noexcept {
        std::swap(k_, o.k_);
        return *this;
    }
    ~kernel() { hk_kernel_unref(k_); }

    hk_kernel *c() const noexcept { return k_; }
    std::string_view repo_id() const noexcept { return hk_kernel_repo_id(k_); }
    std::string_view commit() const noexcept { return hk_kernel_commit(k_); }
    std::string_view variant() const noexcept { return hk_kernel_variant(k_); }
    std::string_view path() const noexcept { return hk_kernel_path(k_); }
    std::vector<std::string_view> functions() const {
        std::vector<std::string_view> names;
        for (std::size_t i = 0; i < hk_kernel_num_functions(k_); i++) names.emplace_back(hk_kernel_function_name(k_, i));
        return names;
    }

    /* hk_kernel_call: HK_ERR_TYPE / HK_ERR_KERNEL carry the kernel's own message. */
    result<value> try_call(const char *name, std::initializer_list<arg> args) const {
        return try_call(name, span<const arg>(args.begin(), args.size()));
    }
    result<value> try_call(const char *name, span<const arg> args) const {
        std::vector<hk_value> a;
        a.reserve(args.size());
        for (const arg &x : args) a.push_back(x.c());
        value out;
        if (hk_kernel_call(out.out(), k_, name, a.data(), a.size()) != HK_OK) return error::last();
        return out;
    }
    value call(const char *name, std::initializer_list<arg> args) const { return try_call(name, args).value(); }

  private:
    explicit kernel(hk_kernel *k) noexcept : k_(k) {}
    hk_kernel *k_;
};

} // namespace hubkern

#endif
