/* Machine detection: fake site-packages / LibTorch trees, fake interpreters, overrides, setters,
 * the backend derivation, and the on-disk parsers fed malformed input.
 * Over 600 lines on purpose: one test program per layer, the cases share the fake trees.
 */
#include "support.h"

#include "env/env_internal.h"
#include <hubkern.h>

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static char *path(const char *rel) { return hk__asprintf("%s/%s", hk_test_tmpdir(), rel); }

static void plant(const char *rel, const char *content) {
    char *p = path(rel);
    hk_test_write(p, content);
    free(p);
}

static void plant_exec(const char *rel, const char *content) {
    char *p = path(rel);
    hk_test_write(p, content);
    chmod(p, 0755);
    free(p);
}

static const char k_version_py[] =
    "from typing import Optional\n\n"
    "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
    "__version__ = '%s'\n"
    "debug = False\n"
    "cuda: Optional[str] = %s\n"
    "git_version = '70d99e998b4955e0049d13a98d77ae1b14db1f45'\n"
    "hip: Optional[str] = %s\n"
    "rocm: Optional[str] = None\n"
    "xpu: Optional[str] = %s\n";

/* the 2.8+ body (a literal) or the <= 2.7 one (asks _C at run time) */
static const char k_init_literal[] =
    "import os\n\ndef compiled_with_cxx11_abi() -> builtins.bool:\n"
    "    r\"\"\"Returns whether PyTorch was built with _GLIBCXX_USE_CXX11_ABI=1\"\"\"\n"
    "    return True\n\n\nfrom torch import _library as _library\n";
static const char k_init_runtime[] =
    "def compiled_with_cxx11_abi() -> builtins.bool:\n"
    "    r\"\"\"Returns whether PyTorch was built with _GLIBCXX_USE_CXX11_ABI=1\"\"\"\n"
    "    return _C._GLIBCXX_USE_CXX11_ABI\n\ndef other():\n    return True\n";

static void plant_torch(const char *site, const char *version, const char *cuda, const char *hip,
                        const char *xpu, const char *init) {
    char *rel = hk__asprintf("%s/torch/version.py", site);
    char *text = hk__asprintf(k_version_py, version, cuda, hip, xpu);
    plant(rel, text);
    free(rel);
    free(text);
    rel = hk__asprintf("%s/torch/__init__.py", site);
    plant(rel, init);
    free(rel);
}

/* Detect with only the planted tree: no interpreter, no CUDA libraries, no HUBKERN_* variables. */
static hk_env *detect_site(const char *site_rel) {
    char *site = path(site_rel);
    hk_env_options o = HK_ENV_OPTIONS_INIT;
    o.site_packages = site;
    o.no_python = 1;
    o.no_cuda = 1;
    o.no_env_overrides = 1;
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    free(site);
    return env;
}

static void test_fake_torch_cuda(void) {
    plant_torch("s1", "2.13.0+cu130", "'13.0'", "None", "None", k_init_literal);
    plant("s1/torch_other/__init__.py", "");
    hk_env *env = detect_site("s1");
    CHECK_STR(hk_env_torch_version(env), "2.13");
    CHECK_STR(hk_env_torch_full_version(env), "2.13.0+cu130");
    CHECK_STR(hk_env_torch_cuda_version(env), "13.0");
    CHECK(hk_env_torch_hip_version(env) == NULL);
    CHECK(hk_env_torch_cxx11_abi(env) == 1);
    CHECK_STR(hk_env_get(env, "torch_cxx11_abi"), "1");
    CHECK_STR(hk_env_backend(env), "cuda");
    CHECK_STR(hk_env_backend_version(env), "13.0");
    CHECK_STR(hk_env_backend_variant(env), "cu130");
    CHECK_STR(hk_env_get(env, "backend_source"), "torch");
    char *dir = path("s1/torch");
    CHECK_STR(hk_env_torch_dir(env), dir);
    free(dir);
    CHECK(hk_env_python_version(env) == NULL);
    CHECK(hk_env_python_free_threaded(env) == -1);
    CHECK(hk_env_site_packages_count(env) == 1);
    CHECK(hk_env_gpu_count(env) == 0);
    CHECK(hk_env_cuda_runtime_version(env) == NULL);

    char *json = hk_env_to_json(env);
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    CHECK(o != NULL);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "torch_version")), "2.13");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "torch_cxx11_abi")));
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "python_free_threaded")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "torch_installed")));
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "gpu_count")) == 0);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "backend_variant")), "cu130");
    cJSON_Delete(o);
    hk_free(json);

    /* a deep copy describes the same machine */
    hk_env *c = NULL;
    CHECK_RC(hk_env_clone(&c, env), HK_OK);
    char *a = hk_env_to_json(env), *b = hk_env_to_json(c);
    CHECK_STR(a, b);
    hk_free(a);
    hk_free(b);
    hk_env_free(c);
    hk_env_free(env);
}

static void test_fake_torch_old_abi(void) {
    /* torch <= 2.7: the ABI is in TorchConfig.cmake */
    plant_torch("s2", "2.7.1+cu126", "'12.6'", "None", "None", k_init_runtime);
    plant("s2/torch/share/cmake/Torch/TorchConfig.cmake",
          "if(CMAKE_SYSTEM_NAME STREQUAL \"Linux\")\n  set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=0\")\nendif()\n");
    hk_env *env = detect_site("s2");
    CHECK_STR(hk_env_torch_version(env), "2.7");
    CHECK(hk_env_torch_cxx11_abi(env) == 0);
    CHECK_STR(hk_env_backend_variant(env), "cu126");
    hk_env_free(env);

    /* no CMake flag either: the mangled names in libc10.so decide */
    plant_torch("s3", "2.6.0", "None", "None", "None", k_init_runtime);
    plant("s3/torch/lib/libc10.so", "\x7f" "ELF....._ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE...");
    env = detect_site("s3");
    CHECK(hk_env_torch_cxx11_abi(env) == 1);
    CHECK_STR(hk_env_backend(env), "cpu"); /* torch without cuda/hip/xpu → cpu, not cudart */
    CHECK_STR(hk_env_get(env, "backend_source"), "torch");
    hk_env_free(env);

    plant_torch("s4", "2.6.0", "None", "None", "None", k_init_runtime);
    plant("s4/torch/lib/libc10.so", "\x7f" "ELF....._ZNSs4_Rep10_M_destroyERKSaIcE....");
    env = detect_site("s4");
    CHECK(hk_env_torch_cxx11_abi(env) == 0);
    hk_env_free(env);

    plant_torch("s5", "2.6.0", "None", "None", "None", k_init_runtime);
    env = detect_site("s5");
    CHECK(hk_env_torch_cxx11_abi(env) == -1); /* nothing says */
    hk_env_free(env);
}

static void test_fake_torch_rocm_xpu(void) {
    plant_torch("r1", "2.12.0+rocm6.3", "None", "'6.3.42131-fa1d09cbd'", "None", k_init_literal);
    hk_env *env = detect_site("r1");
    CHECK_STR(hk_env_torch_hip_version(env), "6.3");
    CHECK_STR(hk_env_backend(env), "rocm");
    CHECK_STR(hk_env_backend_variant(env), "rocm63");
    hk_env_free(env);

    plant_torch("x1", "2.12.0+xpu", "None", "None", "'20250301'", k_init_literal);
    env = detect_site("x1");
    CHECK_STR(hk_env_torch_xpu_version(env), "2025.3");
    CHECK_STR(hk_env_backend(env), "xpu");
    CHECK_STR(hk_env_backend_variant(env), "xpu20253");
    hk_env_free(env);

    /* torch_tpu / torch_neuronx next to torch win over torch's own CUDA (kernels checks them first) */
    plant_torch("t1", "2.13.0+cu130", "'13.0'", "None", "None", k_init_literal);
    plant("t1/torch_neuronx/__init__.py", "");
    env = detect_site("t1");
    CHECK_STR(hk_env_backend(env), "neuron");
    CHECK(hk_env_backend_version(env) == NULL);
    CHECK_STR(hk_env_backend_variant(env), "neuron");
    hk_env_free(env);
    plant("t1/torch_tpu/__init__.py", "");
    env = detect_site("t1");
    CHECK_STR(hk_env_backend(env), "tpu");
    hk_env_free(env);
    plant_torch("n1", "2.13.0", "None", "None", "None", k_init_literal);
    plant("n1/torch_npu/__init__.py", "");
    env = detect_site("n1");
    CHECK_STR(hk_env_backend(env), "cann");
    CHECK(hk_env_backend_variant(env) == NULL); /* the CANN version is not on disk */
    CHECK_RC(hk_env_set(env, "backend_version", "8.1"), HK_OK);
    CHECK_STR(hk_env_backend_variant(env), "cann81");
    hk_env_free(env);
}

static void test_fake_tvm_ffi_and_order(void) {
    /* two site dirs: the first torch wins (sys.path order); tvm_ffi from its own dir */
    plant_torch("m1", "2.12.1", "'12.8'", "None", "None", k_init_literal);
    plant_torch("m2", "2.13.0", "'13.0'", "None", "None", k_init_literal);
    plant("m2/tvm_ffi/_version.py", "__version__ = version = '0.1.15.post2'\n__version_tuple__ = (0, 1, 15)\n");
    plant("m2/tvm_ffi/lib/libtvm_ffi.so", "ELF");
    char *s1 = path("m1"), *s2 = path("m2");
    char *site = hk__asprintf("%s:%s:/nonexistent", s1, s2);
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .site_packages = site, .no_python = 1, .no_cuda = 1, .no_env_overrides = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_torch_version(env), "2.12");
    CHECK_STR(hk_env_torch_cuda_version(env), "12.8");
    CHECK_STR(hk_env_tvm_ffi_version(env), "0.1");
    CHECK_STR(hk_env_tvm_ffi_full_version(env), "0.1.15.post2");
    char *lib = hk__asprintf("%s/tvm_ffi/lib/libtvm_ffi.so", s2);
    CHECK_STR(hk_env_tvm_ffi_lib(env), lib);
    CHECK(hk_env_site_packages_count(env) == 3);
    CHECK_STR(hk_env_site_packages(env, 1), s2);
    CHECK(hk_env_site_packages(env, 3) == NULL);
    hk_env_free(env);

    /* an explicit library path wins; the version falls back to the dist-info METADATA */
    plant("v2/tvm_ffi/__init__.py", "");
    plant("v2/apache_tvm_ffi-0.2.3.dist-info/METADATA",
          "Metadata-Version: 2.1\nName: apache-tvm-ffi\nVersion: 0.2.3\n\nVersion: 9.9\n");
    char *v2 = path("v2");
    hk_env_options o2 = {.version = HK_ENV_OPTIONS_VERSION, .site_packages = v2, .tvm_ffi_lib = "/opt/libtvm_ffi.so", .no_python = 1,
                         .no_cuda = 1, .no_env_overrides = 1};
    CHECK_RC(hk_env_detect(&env, &o2), HK_OK);
    CHECK_STR(hk_env_tvm_ffi_version(env), "0.2");
    CHECK_STR(hk_env_tvm_ffi_lib(env), "/opt/libtvm_ffi.so");
    CHECK(hk_env_torch_version(env) == NULL);
    CHECK_STR(hk_env_backend(env), "cpu");
    CHECK_STR(hk_env_get(env, "backend_source"), "default");
    hk_env_free(env);
    free(v2);
    free(lib);
    free(site);
    free(s1);
    free(s2);
}

/* No Python, no site-packages, only HUBKERN_TVM_FFI_LIB (a host without an interpreter): the
 * version is the one the library reports through TVMFFIGetVersion, so tvm-ffi variants resolve
 * without HUBKERN_TVM_FFI_VERSION set by hand. */
static void test_tvm_ffi_version_from_library(void) {
    const char *b = getenv("HK_BUILD_DIR");
    char *envf = hk__asprintf("%s/tests/kernel-fixtures.env", b ? b : ".");
    char *text = NULL;
    if (hk__read_file(&text, NULL, envf, 1 << 16) != HK_OK || !strstr(text, "HK_TVM_FFI_LIBDIR=")) {
        fprintf(stderr, "%s: no apache-tvm-ffi library recorded (run scripts/setup.sh and re-configure)\n", envf);
        CHECK(0);
        free(envf);
        free(text);
        return;
    }
    char *dir = strstr(text, "HK_TVM_FFI_LIBDIR=") + strlen("HK_TVM_FFI_LIBDIR=");
    dir[strcspn(dir, "\n")] = '\0';
    char *lib = hk__asprintf("%s/libtvm_ffi.so", dir);
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .tvm_ffi_lib = lib, .no_python = 1, .no_cuda = 1,
                        .no_rocm = 1, .no_env_overrides = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_tvm_ffi_lib(env), lib);
    CHECK_STR(hk_env_tvm_ffi_version(env), "0.1");
    const char *full = hk_env_tvm_ffi_full_version(env);
    CHECK(full && strncmp(full, "0.1.", 4) == 0);
    hk_env_free(env);
    /* a library that is no tvm-ffi: no version, and no error */
    o.tvm_ffi_lib = "/nonexistent/libtvm_ffi.so";
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK(hk_env_tvm_ffi_version(env) == NULL);
    hk_env_free(env);
    free(lib);
    free(text);
    free(envf);
}

static void test_libtorch(void) {
    plant("lt/build-version", "2.11.0+cu130\n");
    plant("lt/share/cmake/Torch/TorchConfig.cmake", "# no ABI flag since 2.8\n");
    plant("lt/lib/libc10.so", "xx_ZNSt7__cxx1112basic_stringxx");
    char *lt = path("lt"), *empty = path("empty-site");
    hk__mkdirs(empty, 0777);
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .site_packages = empty, .libtorch_dir = lt, .no_python = 1, .no_cuda = 1,
                        .no_env_overrides = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_torch_version(env), "2.11");
    CHECK_STR(hk_env_torch_full_version(env), "2.11.0+cu130");
    CHECK_STR(hk_env_torch_cuda_version(env), "13.0");
    CHECK(hk_env_torch_cxx11_abi(env) == 1);
    CHECK_STR(hk_env_torch_dir(env), lt);
    CHECK_STR(hk_env_backend_variant(env), "cu130");
    CHECK_STR(hk_env_get(env, "libtorch_dir"), lt);
    hk_env_free(env);

    /* no build-version: the version header */
    plant("lt2/share/cmake/Torch/TorchConfig.cmake", "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=1\")\n");
    plant("lt2/include/torch/headeronly/version.h",
          "#pragma once\n#define TORCH_VERSION_MAJOR 2\n\n#define TORCH_VERSION_MINOR 12\n#define TORCH_VERSION_PATCH 0\n");
    free(lt);
    lt = path("lt2");
    o.libtorch_dir = lt;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_torch_version(env), "2.12");
    CHECK(hk_env_torch_cuda_version(env) == NULL);
    CHECK_STR(hk_env_backend(env), "cpu");
    hk_env_free(env);

    /* not a LibTorch directory: no torch */
    o.libtorch_dir = empty;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK(hk_env_torch_version(env) == NULL);
    hk_env_free(env);

    /* a torch package wins over LibTorch */
    plant_torch("s6", "2.13.0", "'13.0'", "None", "None", k_init_literal);
    char *s6 = path("s6");
    o.site_packages = s6;
    o.libtorch_dir = lt;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_torch_version(env), "2.13");
    hk_env_free(env);
    free(s6);
    free(lt);
    free(empty);
}

static void test_fake_python(void) {
    plant_torch("py-site", "2.13.0+cu130", "'13.0'", "None", "None", k_init_literal);
    char *site = path("py-site");
    char *script = hk__asprintf("#!/bin/sh\nprintf 'hubkern-env-1\\n/opt/py/bin/python3.14t\\n3.14.0\\n1\\n%s\\n/nonexistent-is-kept-out\\n'\n", site);
    /* (the real script filters with os.path.isdir; the fake prints what it wants) */
    plant_exec("bin/fakepy", script);
    free(script);
    char *py = path("bin/fakepy");
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .python = py, .no_cuda = 1, .no_env_overrides = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_python_executable(env), "/opt/py/bin/python3.14t");
    CHECK_STR(hk_env_python_version(env), "3.14.0");
    CHECK(hk_env_python_free_threaded(env) == 1);
    CHECK_STR(hk_env_site_packages(env, 0), site);
    CHECK_STR(hk_env_torch_version(env), "2.13"); /* found through the interpreter's path */
    /* free-threaded 3.14: arch variants are out, noarch stays */
    const char *names[] = {"torch213-cxx11-cu130-x86_64-linux", "torch-cuda"};
    CHECK_RC(hk_env_set(env, "cpu", "x86_64"), HK_OK);
    hk_resolution *r = NULL;
    CHECK_RC(hk_resolve_variants(&r, env, names, 2, NULL), HK_OK);
    CHECK_STR(hk_resolution_best(r), "torch-cuda");
    hk_resolution_free(r);
    hk_env_free(env);
    free(py);

    /* an interpreter that hangs is killed at the timeout; detection still succeeds */
    plant_exec("bin/slowpy", "#!/bin/sh\nexec sleep 30\n");
    py = path("bin/slowpy");
    o.python = py;
    o.python_timeout_ms = 300;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(secs < 5.0);
    CHECK(hk_env_python_version(env) == NULL);
    hk_env_free(env);
    free(py);

    /* garbage output, a failing interpreter, a missing one: no Python, no error */
    static const char *const bad[] = {"#!/bin/sh\necho hello\n", "#!/bin/sh\nexit 3\n",
                                      "#!/bin/sh\nprintf 'hubkern-env-1\\n'\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plant_exec("bin/badpy", bad[i]);
        py = path("bin/badpy");
        o.python = py;
        CHECK_RC(hk_env_detect(&env, &o), HK_OK);
        CHECK(hk_env_python_version(env) == NULL);
        CHECK(hk_env_python_executable(env) == NULL);
        hk_env_free(env);
        free(py);
    }
    o.python = "/nonexistent/python3";
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK(hk_env_python_version(env) == NULL);
    hk_env_free(env);
    free(site);
}

/* The interpreter's answer is remembered: a second detection runs no interpreter; a package
 * installed into a sys.path directory (its mtime), another interpreter file, or another
 * PYTHONPATH runs it again; HUBKERN_PYTHON_CACHE=0 runs it every time. Failures are not kept. */
static size_t runs(const char *counter) {
    char *text = NULL;
    size_t n = 0;
    if (hk__read_file(&text, &n, counter, 1 << 16) != HK_OK) hk_clear_error();
    free(text);
    return n; /* one byte per run */
}

static void test_python_answer_remembered(void) {
    char *site = path("memo-site"), *counter = path("memo-runs");
    hk__mkdirs(site, 0777);
    char *script = hk__asprintf("#!/bin/sh\nprintf x >> '%s'\nprintf 'hubkern-env-1\\n/opt/py/bin/python3\\n3.12.1\\n0\\n%s\\n'\n",
                                counter, site);
    plant_exec("bin/memopy", script);
    char *py = path("bin/memopy");
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .python = py, .no_cuda = 1, .no_rocm = 1, .no_env_overrides = 1};
    hk_env *env = NULL;
    for (int i = 0; i < 3; i++) {
        CHECK_RC(hk_env_detect(&env, &o), HK_OK);
        CHECK_STR(hk_env_python_version(env), "3.12.1");
        CHECK_STR(hk_env_site_packages(env, 0), site);
        hk_env_free(env);
    }
    CHECK(runs(counter) == 1);
    /* a package appears in site-packages: its mtime changes */
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    plant("memo-site/newpkg.pth", "");
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    hk_env_free(env);
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    hk_env_free(env);
    CHECK(runs(counter) == 2);
    /* PYTHONPATH changes sys.path */
    setenv("PYTHONPATH", "/somewhere", 1);
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    hk_env_free(env);
    unsetenv("PYTHONPATH");
    CHECK(runs(counter) == 3);
    /* another interpreter in the same file (pyenv install, venv recreated) */
    char *script2 = hk__asprintf("%s# another build\n", script);
    plant_exec("bin/memopy", script2);
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    hk_env_free(env);
    CHECK(runs(counter) == 4);
    /* off */
    setenv("HUBKERN_PYTHON_CACHE", "0", 1);
    for (int i = 0; i < 2; i++) {
        CHECK_RC(hk_env_detect(&env, &o), HK_OK);
        hk_env_free(env);
    }
    unsetenv("HUBKERN_PYTHON_CACHE");
    CHECK(runs(counter) == 6);
    free(script2);
    free(script);
    free(py);
    free(site);
    free(counter);
}

static void test_env_overrides(void) {
    plant_torch("ov", "2.13.0+cu130", "'13.0'", "None", "None", k_init_literal);
    char *site = path("ov");
    setenv("HUBKERN_SITE_PACKAGES", site, 1);
    setenv("HUBKERN_PYTHON", "none", 1);
    setenv("HUBKERN_NO_CUDA", "1", 1);
    setenv("HUBKERN_TORCH_VERSION", "2.12.0", 1);
    setenv("HUBKERN_BACKEND", "rocm", 1);
    setenv("HUBKERN_BACKEND_VERSION", "7.1", 1);
    setenv("HUBKERN_GPUS", "9.0,8.6", 1);
    setenv("HUBKERN_CPU", "ARM64", 1);
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, NULL), HK_OK);
    CHECK_STR(hk_env_torch_version(env), "2.12");
    CHECK_STR(hk_env_torch_cuda_version(env), "13.0"); /* from the tree */
    CHECK_STR(hk_env_backend_variant(env), "rocm71");
    CHECK_STR(hk_env_get(env, "backend_source"), "override");
    CHECK_STR(hk_env_cpu(env), "aarch64");
    CHECK(hk_env_python_version(env) == NULL);
    CHECK(hk_env_gpu_count(env) == 2);
    int ma = 0, mi = 0;
    CHECK_RC(hk_env_gpu_capability(env, 1, &ma, &mi), HK_OK);
    CHECK(ma == 8 && mi == 6);
    CHECK_STR(hk_env_gpu_name(env, 0), "GPU 0");
    hk_env_free(env);

    /* an empty variable clears the field: "no torch here" */
    setenv("HUBKERN_TORCH_VERSION", "", 1);
    unsetenv("HUBKERN_BACKEND");
    unsetenv("HUBKERN_BACKEND_VERSION");
    setenv("HUBKERN_CUDA_RUNTIME_VERSION", "12.8", 1);
    CHECK_RC(hk_env_detect(&env, NULL), HK_OK);
    CHECK(hk_env_torch_version(env) == NULL);
    CHECK_STR(hk_env_backend_variant(env), "cu128"); /* no torch: the cudart path */
    CHECK_STR(hk_env_get(env, "backend_source"), "cudart");
    hk_env_free(env);

    /* a malformed override fails and names the variable */
    setenv("HUBKERN_TORCH_CXX11_ABI", "maybe", 1);
    CHECK_RC(hk_env_detect(&env, NULL), HK_ERR_INVALID_ARG);
    CHECK(env == NULL);
    CHECK(strstr(hk_last_error(), "HUBKERN_TORCH_CXX11_ABI") != NULL);
    CHECK(strstr(hk_last_error(), "maybe") != NULL);

    /* no_env_overrides ignores all of it */
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .no_env_overrides = 1, .no_python = 1, .no_cuda = 1, .site_packages = "/nonexistent"};
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK(hk_env_torch_version(env) == NULL);
    CHECK(hk_env_gpu_count(env) == 0);
    hk_env_free(env);

    static const char *const vars[] = {"HUBKERN_SITE_PACKAGES", "HUBKERN_PYTHON", "HUBKERN_NO_CUDA",
                                       "HUBKERN_TORCH_VERSION", "HUBKERN_GPUS", "HUBKERN_CPU",
                                       "HUBKERN_CUDA_RUNTIME_VERSION", "HUBKERN_TORCH_CXX11_ABI"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    free(site);
}

static void test_setters(void) {
    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    CHECK(hk_env_os(env) == NULL && hk_env_cpu(env) == NULL);
    CHECK_STR(hk_env_backend(env), "cpu");
    CHECK_STR(hk_env_get(env, "backend_source"), "default");

    /* normalisation */
    CHECK_RC(hk_env_set(env, "cpu", "AMD64"), HK_OK);
    CHECK_STR(hk_env_cpu(env), "x86_64");
    CHECK_RC(hk_env_set(env, "cpu", "arm64"), HK_OK);
    CHECK_STR(hk_env_cpu(env), "aarch64");
    CHECK_RC(hk_env_set(env, "cpu", "ARM64"), HK_OK); /* Windows ARM64 too */
    CHECK_STR(hk_env_cpu(env), "aarch64");
    CHECK_RC(hk_env_set(env, "os", "Darwin"), HK_OK);
    CHECK_STR(hk_env_os(env), "darwin");
    CHECK_RC(hk_env_set(env, "torch_version", "2.13.1+cu130"), HK_OK);
    CHECK_STR(hk_env_torch_version(env), "2.13");
    CHECK_RC(hk_env_set(env, "tvm_ffi_version", "0.1.15.post2"), HK_OK);
    CHECK_STR(hk_env_tvm_ffi_version(env), "0.1");
    CHECK_RC(hk_env_set(env, "cuda_driver_version", "13"), HK_OK);
    CHECK_STR(hk_env_cuda_driver_version(env), "13.0");

    /* torch on Apple silicon → metal; the ABI is unknown off Linux */
    CHECK_STR(hk_env_backend(env), "metal");
    CHECK(hk_env_backend_version(env) == NULL);
    CHECK(hk_env_torch_cxx11_abi(env) == -1);
    CHECK_RC(hk_env_set(env, "os", "linux"), HK_OK);
    CHECK_STR(hk_env_backend(env), "cpu");      /* stated torch, no cuda, no cudart → cpu */
    CHECK(hk_env_torch_cxx11_abi(env) == 1);    /* torch >= 2.8 on Linux */
    CHECK_RC(hk_env_set(env, "torch_version", "2.7"), HK_OK);
    CHECK(hk_env_torch_cxx11_abi(env) == -1);
    CHECK_RC(hk_env_set(env, "torch_cxx11_abi", "false"), HK_OK);
    CHECK(hk_env_torch_cxx11_abi(env) == 0);
    CHECK_RC(hk_env_set(env, "cuda_runtime_version", "12.8"), HK_OK);
    CHECK_STR(hk_env_backend_variant(env), "cu128"); /* stated torch only: cudart decides */
    CHECK_RC(hk_env_set(env, "torch_cuda_version", "12.6"), HK_OK);
    CHECK_STR(hk_env_backend_variant(env), "cu126"); /* torch's CUDA, not the runtime's */
    CHECK_RC(hk_env_set(env, "backend", "cpu"), HK_OK);
    CHECK_STR(hk_env_backend_variant(env), "cpu");
    CHECK(hk_env_backend_version(env) == NULL);
    CHECK_RC(hk_env_set(env, "backend", "xpu"), HK_OK);
    CHECK(hk_env_backend_variant(env) == NULL);
    CHECK_RC(hk_env_set(env, "torch_xpu_version", "2026.0"), HK_OK);
    CHECK_STR(hk_env_backend_variant(env), "xpu20260");
    CHECK_RC(hk_env_set(env, "backend", NULL), HK_OK); /* back to deriving */
    CHECK_STR(hk_env_backend_variant(env), "cu126");
    CHECK_RC(hk_env_set(env, "python_version", "3.13.1"), HK_OK);
    CHECK(hk_env_python_free_threaded(env) == 0); /* known Python, not free-threaded */
    CHECK_RC(hk_env_set(env, "gpus", "9.0, 8.6"), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_env_set(env, "gpus", "9.0,10.0"), HK_OK);
    CHECK(hk_env_gpu_count(env) == 2);
    CHECK_STR(hk_env_get(env, "gpus"), "9.0,10.0");
    CHECK_RC(hk_env_set(env, "gpus", "none"), HK_OK);
    CHECK(hk_env_gpu_count(env) == 0);
    CHECK_RC(hk_env_gpu_capability(env, 0, NULL, NULL), HK_ERR_INVALID_ARG);
    CHECK(hk_env_gpu_name(env, -1) == NULL);
    CHECK_RC(hk_env_set(env, "site_packages", "/a::/b:"), HK_OK);
    CHECK(hk_env_site_packages_count(env) == 2);
    CHECK_STR(hk_env_site_packages(env, 1), "/b");

    /* rejected keys and values leave the env unchanged */
    static const struct {
        const char *key, *value;
    } bad[] = {{"torch", "2.13"},          {NULL, "x"},
               {"torch_version", "two"},  {"torch_version", "2.13; rm -rf"},
               {"torch_cxx11_abi", "2"},  {"python_free_threaded", "maybe"},
               {"backend", "vulkan"},     {"backend", "CUDA"},
               {"gpus", "9"},             {"gpus", "9.x"},
               {"gpus", ",9.0"},          {"gpus", "123.0"},
               {"os", "linux os"},        {"cpu", "x86-64"},
               {"macos_version", "26"},   {"python_version", "three"},
               {"cuda_runtime_version", "99999999999.0"}};
    char *before = hk_env_to_json(env);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = hk_env_set(env, bad[i].key, bad[i].value);
        hk_test_checks++;
        if (rc != HK_ERR_INVALID_ARG) {
            hk_test_failures++;
            fprintf(stderr, "hk_env_set(%s, %s) returned %s\n", bad[i].key ? bad[i].key : "NULL",
                    bad[i].value, hk_error_name(rc));
        }
    }
    CHECK(strstr(hk_last_error(), "cuda_runtime_version") != NULL);
    CHECK_RC(hk_env_set(env, "torch", "1"), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "known keys: os, cpu") != NULL);
    char *after = hk_env_to_json(env);
    CHECK_STR(after, before);
    hk_free(before);
    hk_free(after);
    CHECK_RC(hk_env_set(NULL, "os", "linux"), HK_ERR_INVALID_ARG);
    CHECK(hk_env_get(env, "nope") == NULL);
    CHECK(hk_env_get(NULL, "os") == NULL);
    CHECK_RC(hk_env_new(NULL), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_env_detect(NULL, NULL), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_env_clone(NULL, env), HK_ERR_INVALID_ARG);
    CHECK(hk_env_to_json(NULL) == NULL);
    CHECK_STR(hk_env_backend(NULL), "cpu");
    hk_env_free(NULL);
    hk_env_free(env);
}

static void test_parsers(void) {
    /* Python assignments */
    static const struct {
        const char *text, *name, *want; /* want NULL: not found */
    } py[] = {
        {"__version__ = '2.13.0+cu130'\n", "__version__", "2.13.0+cu130"},
        {"x = 1\n__version__ = \"2.1\"\n", "__version__", "2.1"},
        {"cuda: Optional[str] = '12.6'\n", "cuda", "12.6"},
        {"hip: Optional[str] = None\n", "hip", ""},
        {"__version__ = version = '0.1.15.post2'\n", "__version__", "0.1.15.post2"},
        {"__version__ = version\n", "__version__", NULL},
        {"__version__ = '2.1\n", "__version__", NULL},
        {"__version__ = 'a\\'b'\n", "__version__", NULL},
        {"__version__ == '1'\n", "__version__", NULL},
        {"__version__\n", "__version__", NULL},
        {"__version__", "__version__", NULL},
        {"x__version__ = '1'\n", "__version__", NULL},
        {"__version__x = '1'\n", "__version__", NULL},
        {"    __version__ = '1'\n", "__version__", NULL},
        {"cudax = '1'\ncuda = '2'\n", "cuda", "2"},
        {"cuda = Nonesuch\n", "cuda", NULL},
        {"cuda: str\ncuda = '3'", "cuda", "3"},
        {"", "cuda", NULL},
        {"\n\n\n", "cuda", NULL},
    };
    for (size_t i = 0; i < sizeof py / sizeof py[0]; i++) {
        char *got = hk__py_assignment(py[i].text, py[i].name);
        hk_test_checks++;
        if ((got == NULL) != (py[i].want == NULL) || (got && strcmp(got, py[i].want) != 0)) {
            hk_test_failures++;
            fprintf(stderr, "py_assignment(%s) in '%s': got '%s', want '%s'\n", py[i].name, py[i].text,
                    got ? got : "(null)", py[i].want ? py[i].want : "(null)");
        }
        free(got);
    }
    CHECK(hk__py_assignment(NULL, "x") == NULL);
    CHECK(hk__py_assignment("x = '1'", NULL) == NULL);

    /* TorchConfig.cmake */
    CHECK(hk__torch_cmake_cxx11("set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=1\")") == 1);
    CHECK(hk__torch_cmake_cxx11("set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=0\")") == 0);
    CHECK(hk__torch_cmake_cxx11("set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=\")") == -1); /* pytorch#45323 */
    CHECK(hk__torch_cmake_cxx11("# -D_GLIBCXX_USE_CXX11_ABI=x\n -D_GLIBCXX_USE_CXX11_ABI=1") == 1);
    CHECK(hk__torch_cmake_cxx11("if(TORCH_CXX_FLAGS)\n") == -1);
    CHECK(hk__torch_cmake_cxx11("") == -1);
    CHECK(hk__torch_cmake_cxx11(NULL) == -1);

    /* torch/__init__.py */
    CHECK(hk__torch_init_cxx11(k_init_literal) == 1);
    CHECK(hk__torch_init_cxx11("def compiled_with_cxx11_abi():\n    return False\n") == 0);
    CHECK(hk__torch_init_cxx11(k_init_runtime) == -1);
    CHECK(hk__torch_init_cxx11("def compiled_with_cxx11_abi():\n    return Truex\n") == -1);
    CHECK(hk__torch_init_cxx11("def compiled_with_cxx11_abi") == -1);
    CHECK(hk__torch_init_cxx11("def compiled_with_cxx11_abi():\n    pass\ndef f():\n    return True\n") == -1);
    CHECK(hk__torch_init_cxx11("no such function") == -1);
    CHECK(hk__torch_init_cxx11(NULL) == -1);

    /* dist-info METADATA */
    char *v = hk__metadata_version("Metadata-Version: 2.1\nName: x\nVersion: 0.1.15.post2\r\n");
    CHECK_STR(v, "0.1.15.post2");
    free(v);
    CHECK(hk__metadata_version("Name: x\nVersion:   \n") == NULL);
    CHECK(hk__metadata_version("Name: x\n\nVersion: 1.0\n") == NULL); /* the body is not headers */
    CHECK(hk__metadata_version("") == NULL);
    CHECK(hk__metadata_version(NULL) == NULL);

    /* local version tags (LibTorch build-version) */
    static const struct {
        const char *in, *cuda, *hip;
    } tags[] = {{"2.11.0+cu130", "13.0", NULL}, {"2.8.0+cu128", "12.8", NULL}, {"2.4.1+cu118", "11.8", NULL},
                {"2.11.0+cpu", NULL, NULL},     {"2.11.0", NULL, NULL},         {"2.6.0+rocm6.3", NULL, "6.3"},
                {"2.6.0+rocm", NULL, NULL},     {"2.6.0+cu", NULL, NULL},       {"2.6.0+cu1", NULL, NULL},
                {"2.6.0+cu123456", NULL, NULL}, {"+", NULL, NULL},              {NULL, NULL, NULL}};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        char *cuda = (char *)1, *hip = (char *)1;
        hk__torch_local_tag(tags[i].in, &cuda, &hip);
        hk_test_checks++;
        bool ok = ((cuda == NULL) == (tags[i].cuda == NULL)) && (!cuda || strcmp(cuda, tags[i].cuda) == 0) &&
                  ((hip == NULL) == (tags[i].hip == NULL)) && (!hip || strcmp(hip, tags[i].hip) == 0);
        if (!ok) {
            hk_test_failures++;
            fprintf(stderr, "local tag '%s': cuda %s hip %s\n", tags[i].in ? tags[i].in : "NULL",
                    cuda ? cuda : "-", hip ? hip : "-");
        }
        free(cuda);
        free(hip);
    }

    /* version prefixes */
    uint32_t ma = 7, mi = 7;
    CHECK(hk__env_ver2("2.13.0+cu130", &ma, &mi) && ma == 2 && mi == 13);
    CHECK(hk__env_ver2("13", &ma, &mi) && ma == 13 && mi == 0);
    CHECK(hk__env_ver2("13.", &ma, &mi) && ma == 13 && mi == 0);
    CHECK(!hk__env_ver2("v2.1", &ma, &mi));
    CHECK(!hk__env_ver2("", &ma, &mi));
    CHECK(!hk__env_ver2(NULL, &ma, &mi));
    CHECK(!hk__env_ver2("99999999999.1", &ma, &mi));
    CHECK(!hk__env_ver2("1.99999999999", &ma, &mi));
}

/* The real machine, with no interpreter and no CUDA: fast and not an error. */
static void test_bare_detection(void) {
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .no_python = 1, .no_cuda = 1, .no_env_overrides = 1};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(secs < 1.0);
    CHECK(hk_env_os(env) != NULL);
    CHECK(hk_env_cpu(env) != NULL);
    CHECK(hk_env_python_version(env) == NULL);
    CHECK(hk_env_site_packages_count(env) == 0);
    CHECK(hk_env_torch_version(env) == NULL);
    CHECK_STR(hk_env_backend(env), "cpu");
    CHECK(hk_env_gpu_count(env) == 0);
    char *json = hk_env_to_json(env);
    cJSON *o2 = json ? cJSON_Parse(json) : NULL;
    CHECK(o2 != NULL && cJSON_IsNull(cJSON_GetObjectItem(o2, "torch_version")));
    cJSON_Delete(o2);
    hk_free(json);
    hk_env_free(env);
}

int main(void) {
    /* the remembered Python answers of this run go to its own directory, never ~/.cache */
    char *xdg = path("xdg-cache");
    setenv("XDG_CACHE_HOME", xdg, 1);
    free(xdg);
    test_fake_torch_cuda();
    test_fake_torch_old_abi();
    test_fake_torch_rocm_xpu();
    test_fake_tvm_ffi_and_order();
    test_tvm_ffi_version_from_library();
    test_libtorch();
    test_fake_python();
    test_python_answer_remembered();
    test_env_overrides();
    test_setters();
    test_parsers();
    test_bare_detection();
    return hk_test_finish();
}
