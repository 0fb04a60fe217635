// cpfs native addon: only the system calls Node cannot make (see src/native/index.ts and
// native-bindings.md). Written from the man pages and the semantics of libfuse's
// include/fuse_kernel.h. The FUSE protocol itself is spoken in TypeScript; this file only
// mounts, reads batches of requests and watches the device.
//
// Conventions: every function validates its arguments (TypeError for a wrong type,
// RangeError for an integer out of range) and every failing system call throws an Error whose
// .code is the errno name, .errno the negative errno (as Node does) and .syscall the call.
// Strings from JS are heap copies freed by AUTOFREE, so no early return can leak one.
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/openat2.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/xattr.h>
#include <unistd.h>

#include "underneath.h"

extern char **environ;

#define MAX_SAFE_INT 9007199254740991LL /* 2^53 - 1: the largest integer a JS number holds exactly */

static void free_ptr (void *p) { free(*(void **)p); }
#define AUTOFREE __attribute__((cleanup(free_ptr)))

// ---------------------------------------------------------------------------------------------
// Errors

// A failed N-API call: make sure some exception is pending so JS sees why.
static void napi_failed (napi_env env) {
  const napi_extended_error_info *info = NULL;
  bool pending = false;
  napi_get_last_error_info(env, &info);
  const char *msg = info && info->error_message ? info->error_message : "N-API call failed";
  if (napi_is_exception_pending(env, &pending) == napi_ok && !pending) napi_throw_error(env, "ERR_NAPI", msg);
}

// TRY for functions returning napi_value, TRYB for helpers returning bool.
#define TRY(call) do { if ((call) != napi_ok) { napi_failed(env); return NULL; } } while (0)
#define TRYB(call) do { if ((call) != napi_ok) { napi_failed(env); return false; } } while (0)

static bool set_prop (napi_env env, napi_value obj, const char *key, napi_value v) {
  TRYB(napi_set_named_property(env, obj, key, v));
  return true;
}

static bool set_str (napi_env env, napi_value obj, const char *key, const char *s) {
  napi_value v;
  TRYB(napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v));
  return set_prop(env, obj, key, v);
}

static bool set_num (napi_env env, napi_value obj, const char *key, double n) {
  napi_value v;
  TRYB(napi_create_double(env, n, &v));
  return set_prop(env, obj, key, v);
}

// Throws Error(message) with .code, .syscall, and .errno (-err) when err != 0, .path if given.
static napi_value throw_coded (napi_env env, const char *code, int err, const char *syscall,
                               const char *message, const char *path) {
  napi_value jcode, jmsg, e;
  TRY(napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &jcode));
  TRY(napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &jmsg));
  TRY(napi_create_error(env, jcode, jmsg, &e));
  if (err && !set_num(env, e, "errno", -err)) return NULL;
  if (!set_str(env, e, "syscall", syscall)) return NULL;
  if (path && !set_str(env, e, "path", path)) return NULL;
  TRY(napi_throw(env, e));
  return NULL;
}

// "<CODE>: <syscall> failed[: <path>]"
static napi_value throw_errno (napi_env env, int err, const char *syscall, const char *path) {
  const char *code = strerrorname_np(err);
  AUTOFREE char *msg = NULL;
  if (!code) code = "UNKNOWN";
  int n = path ? asprintf(&msg, "%s: %s failed: %s", code, syscall, path)
        : asprintf(&msg, "%s: %s failed", code, syscall);
  if (n < 0) { msg = NULL; napi_throw_error(env, code, "out of memory while reporting an error"); return NULL; }
  return throw_coded(env, code, err, syscall, msg, path);
}

// An argument problem: TypeError (ERR_INVALID_ARG_TYPE) or RangeError (ERR_OUT_OF_RANGE), as Node.
static bool bad_arg (napi_env env, bool range, const char *name, const char *want) {
  char msg[200];
  snprintf(msg, sizeof msg, "The \"%s\" argument must be %s", name, want);
  if (range) napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
  else napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", msg);
  return false;
}

// ---------------------------------------------------------------------------------------------
// Arguments

static bool get_args (napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  TRYB(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc >= want) return true;
  char msg[80];
  snprintf(msg, sizeof msg, "expected %zu arguments, got %zu", want, argc);
  napi_throw_type_error(env, "ERR_MISSING_ARGS", msg);
  return false;
}

static bool is_type (napi_env env, napi_value v, napi_valuetype want, bool *ok) {
  napi_valuetype t;
  TRYB(napi_typeof(env, v, &t));
  *ok = t == want;
  return true;
}

// A JS number that is an integer within [min, max] (both within +-2^53, so exact as doubles).
static bool arg_int (napi_env env, napi_value v, const char *name, int64_t min, int64_t max, int64_t *out) {
  bool ok;
  double d;
  if (!is_type(env, v, napi_number, &ok)) return false;
  if (!ok) return bad_arg(env, false, name, "a number");
  TRYB(napi_get_value_double(env, v, &d));
  // The range test comes first (and is false for NaN) so that the cast below is defined.
  if (!(d >= (double)min && d <= (double)max) || d != (double)(int64_t)d) {
    char want[96];
    snprintf(want, sizeof want, "an integer in [%" PRId64 ", %" PRId64 "]", min, max);
    return bad_arg(env, true, name, want);
  }
  *out = (int64_t)d;
  return true;
}

static bool arg_i32 (napi_env env, napi_value v, const char *name, int64_t min, int64_t max, int *out) {
  int64_t x;
  if (!arg_int(env, v, name, min, max, &x)) return false;
  *out = (int)x;
  return true;
}

static bool arg_u32 (napi_env env, napi_value v, const char *name, uint32_t *out) {
  int64_t x;
  if (!arg_int(env, v, name, 0, UINT32_MAX, &x)) return false;
  *out = (uint32_t)x;
  return true;
}

static bool arg_fd (napi_env env, napi_value v, const char *name, int *fd) {
  return arg_i32(env, v, name, 0, INT32_MAX, fd);
}

// A directory fd for the *at calls: an open fd or AT_FDCWD.
static bool arg_dirfd (napi_env env, napi_value v, const char *name, int *fd) {
  if (!arg_i32(env, v, name, AT_FDCWD, INT32_MAX, fd)) return false;
  return *fd >= 0 || *fd == AT_FDCWD || bad_arg(env, true, name, "a file descriptor or AT_FDCWD (-100)");
}

// A heap copy of a JS string (caller frees). NUL bytes are refused: C would silently cut there.
static bool arg_str (napi_env env, napi_value v, const char *name, char **out) {
  bool ok;
  size_t len, got;
  if (!is_type(env, v, napi_string, &ok)) return false;
  if (!ok) return bad_arg(env, false, name, "a string");
  TRYB(napi_get_value_string_utf8(env, v, NULL, 0, &len));
  char *s = malloc(len + 1);
  if (!s) { napi_throw_error(env, "ENOMEM", "out of memory"); return false; }
  if (napi_get_value_string_utf8(env, v, s, len + 1, &got) != napi_ok) { free(s); napi_failed(env); return false; }
  if (strlen(s) != got) { free(s); return bad_arg(env, false, name, "a string without null bytes"); }
  *out = s;
  return true;
}

static bool arg_buf (napi_env env, napi_value v, const char *name, void **data, size_t *len) {
  bool ok;
  TRYB(napi_is_buffer(env, v, &ok));
  if (!ok) return bad_arg(env, false, name, "a Buffer");
  TRYB(napi_get_buffer_info(env, v, data, len));
  return true;
}

static bool arg_bool (napi_env env, napi_value v, const char *name, bool *out) {
  bool ok;
  if (!is_type(env, v, napi_boolean, &ok)) return false;
  if (!ok) return bad_arg(env, false, name, "a boolean");
  TRYB(napi_get_value_bool(env, v, out));
  return true;
}

static napi_value undefined (napi_env env) {
  napi_value u;
  TRY(napi_get_undefined(env, &u));
  return u;
}

static napi_value number (napi_env env, int64_t n) {
  napi_value v;
  TRY(napi_create_int64(env, n, &v));
  return v;
}

// Error reports show no path for AT_EMPTY_PATH calls ('' names the fd itself).
static const char *shown (const char *name) { return *name ? name : NULL; }

// ---------------------------------------------------------------------------------------------
// FUSE device: mount, umount, fusermount

// True when the comma-separated mount data has the option fd=<fd>: the kernel takes the
// connection from that option, so a mismatch would mount a device the caller never reads.
static bool data_names_fd (const char *data, int fd) {
  char want[24];
  int n = snprintf(want, sizeof want, "fd=%d", fd);
  for (const char *p = data;; p++) {
    if (strncmp(p, want, n) == 0 && (p[n] == ',' || p[n] == '\0')) return true;
    if (!(p = strchr(p, ','))) return false;
  }
}

// fuseMount(fd, target, source, type, flags, data)
static napi_value js_fuse_mount (napi_env env, napi_callback_info info) {
  napi_value argv[6];
  int fd;
  uint32_t flags;
  AUTOFREE char *target = NULL;
  AUTOFREE char *source = NULL;
  AUTOFREE char *type = NULL;
  AUTOFREE char *data = NULL;
  if (!get_args(env, info, 6, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !arg_str(env, argv[1], "target", &target) || !arg_str(env, argv[2], "source", &source) ||
      !arg_str(env, argv[3], "type", &type) || !arg_u32(env, argv[4], "flags", &flags) ||
      !arg_str(env, argv[5], "data", &data)) return NULL;
  if (!data_names_fd(data, fd)) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "The \"data\" argument must contain the option fd=<fd>");
    return NULL;
  }
  if (mount(source, target, type, flags, data) < 0) return throw_errno(env, errno, "mount", target);
  return undefined(env);
}

// umount2(target, flags)
static napi_value js_umount2 (napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int flags;
  AUTOFREE char *target = NULL;
  if (!get_args(env, info, 2, argv) || !arg_str(env, argv[0], "target", &target) ||
      !arg_i32(env, argv[1], "flags", 0, INT32_MAX, &flags)) return NULL;
  if (umount2(target, flags) < 0) return throw_errno(env, errno, "umount2", target);
  return undefined(env);
}

// A copy of environ with _FUSE_COMMFD=<fd> (fusermount's "send the fd here" variable) replacing
// any inherited one. Only the pointer array is allocated; var is the caller's storage.
static char **env_with_commfd (char *var) {
  size_t n = 0, j = 0;
  while (environ[n]) n++;
  char **envp = calloc(n + 2, sizeof *envp);
  if (!envp) return NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "_FUSE_COMMFD=", 13) != 0) envp[j++] = environ[i];
  envp[j] = var;
  return envp;
}

// posix_spawnp(prog) with child_fd inherited. Everything cpfs opens is close-on-exec; a dup2 of
// the fd onto itself clears that flag in the child only (glibc >= 2.29), so no other child that
// Node spawns at the same moment inherits the socket. SIGPIPE is reset because Node ignores it
// and ignored signals survive exec. Returns 0 or an errno (ENOENT when prog is not on PATH).
static int spawn_with_fd (const char *prog, char *const argv[], char *const envp[], int child_fd, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t def;
  int err = posix_spawn_file_actions_init(&fa);
  if (err) return err;
  err = posix_spawnattr_init(&attr);
  if (err) { posix_spawn_file_actions_destroy(&fa); return err; }
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  err = posix_spawn_file_actions_adddup2(&fa, child_fd, child_fd);
  if (!err) err = posix_spawnattr_setsigdefault(&attr, &def);
  if (!err) err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  if (!err) err = posix_spawnp(pid, prog, &fa, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  return err;
}

// Receives one fd sent with SCM_RIGHTS; *fd = -1 when the peer closed without sending one.
static int recv_fd (int sock, int *fd) {
  char byte;
  struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
  union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
  struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
  ssize_t n;
  *fd = -1;
  do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  if (n > 0 && c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(fd, CMSG_DATA(c), sizeof(int));
  return 0;
}

static int wait_child (pid_t pid, int *status) {
  while (waitpid(pid, status, 0) < 0)
    if (errno != EINTR) return errno;
  return 0;
}

static napi_value throw_fusermount (napi_env env, const char *prog, const char *why, const char *target) {
  AUTOFREE char *msg = NULL;
  if (asprintf(&msg, "EFUSERMOUNT: %s failed (%s): %s", prog, why, target) < 0) msg = NULL;
  return throw_coded(env, "EFUSERMOUNT", 0, prog, msg ? msg : "EFUSERMOUNT: fusermount failed", target);
}

// Runs fusermount3 (or fusermount) -o options -- target, which opens /dev/fuse, mounts it and
// sends the fd back over the socket. The fd is received before waiting, so a fusermount that
// stays alive after sending (auto_unmount) does not hang us before the fd arrives.
static napi_value fusermount (napi_env env, const char *target, const char *options, int sv[2]) {
  char var[40];
  snprintf(var, sizeof var, "_FUSE_COMMFD=%d", sv[1]);
  AUTOFREE char **envp = env_with_commfd(var);
  if (!envp) return throw_errno(env, ENOMEM, "calloc", NULL);
  const char *prog = "fusermount3";
  char *argv[] = { (char *)prog, "-o", (char *)options, "--", (char *)target, NULL };
  char **args = *options ? argv : (char *[]){ (char *)prog, "--", (char *)target, NULL };
  pid_t pid;
  int err = spawn_with_fd(prog, args, envp, sv[1], &pid);
  if (err == ENOENT) {
    prog = "fusermount";
    args[0] = (char *)prog;
    err = spawn_with_fd(prog, args, envp, sv[1], &pid);
  }
  close(sv[1]); // only the child's copy may stay open, so its exit ends our recvmsg
  sv[1] = -1;
  if (err) return throw_errno(env, err, "posix_spawnp", err == ENOENT ? "fusermount3" : prog);
  int fd, status = 0, rerr = recv_fd(sv[0], &fd), werr = wait_child(pid, &status);
  char why[48];
  if (werr || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || rerr || fd < 0) {
    if (fd >= 0) close(fd);
    if (werr) return throw_errno(env, werr, "waitpid", NULL);
    if (WIFSIGNALED(status)) snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
    else if (WEXITSTATUS(status) != 0) snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
    else if (rerr) return throw_errno(env, rerr, "recvmsg", NULL);
    else snprintf(why, sizeof why, "exit status 0 but no file descriptor was sent");
    return throw_fusermount(env, prog, why, target);
  }
  return number(env, fd);
}

// fusermountOpen(target, options) -> /dev/fuse fd
static napi_value js_fusermount_open (napi_env env, napi_callback_info info) {
  napi_value argv[2], result;
  int sv[2];
  AUTOFREE char *target = NULL;
  AUTOFREE char *options = NULL;
  if (!get_args(env, info, 2, argv) || !arg_str(env, argv[0], "target", &target) ||
      !arg_str(env, argv[1], "options", &options)) return NULL;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return throw_errno(env, errno, "socketpair", NULL);
  result = fusermount(env, target, options, sv);
  close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
  return result;
}

// setNonBlocking(fd, on)
static napi_value js_set_non_blocking (napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int fd, fl;
  bool on;
  if (!get_args(env, info, 2, argv) || !arg_fd(env, argv[0], "fd", &fd) || !arg_bool(env, argv[1], "on", &on)) return NULL;
  if ((fl = fcntl(fd, F_GETFL)) < 0) return throw_errno(env, errno, "fcntl", NULL);
  fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
  if (fcntl(fd, F_SETFL, fl) < 0) return throw_errno(env, errno, "fcntl", NULL);
  return undefined(env);
}

// ---------------------------------------------------------------------------------------------
// FUSE device: reading requests

#define FUSE_IN_HEADER_SIZE 40 /* sizeof(struct fuse_in_header): every request starts with one */

// readBatch(fd, buf, minFree, maxCount[, spinUs]) -> count, 0 (nothing ready) or -19 (connection
// ended). One request per read(2): the kernel never merges requests, and each read is offered all
// the space left (at least minFree) because a request that does not fit is failed, not split.
// With spinUs > 0 and nothing ready yet, it keeps trying for up to that many microseconds before
// returning 0: on a virtual machine whose idle CPUs halt, a request that arrives while the
// daemon sleeps costs a wake-up of the whole CPU, several times the request itself.
static napi_value js_read_batch (napi_env env, napi_callback_info info) {
  napi_value argv[5];
  size_t argc = 5;
  int fd;
  void *data;
  size_t len, off = 0;
  int64_t min_free, max_count, spin_us = 0, count = 0;
  struct timespec deadline = { 0, 0 };
  TRY(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) { bad_arg(env, false, "arguments", "fd, buf, minFree, maxCount[, spinUs]"); return NULL; }
  if (!arg_fd(env, argv[0], "fd", &fd) || !arg_buf(env, argv[1], "buf", &data, &len)) return NULL;
  if (len == 0) { bad_arg(env, true, "buf", "a non-empty Buffer"); return NULL; }
  if (!arg_int(env, argv[2], "minFree", 1, (int64_t)len, &min_free) ||
      !arg_int(env, argv[3], "maxCount", 1, INT32_MAX, &max_count)) return NULL;
  if (argc > 4 && !arg_int(env, argv[4], "spinUs", 0, 1000000, &spin_us)) return NULL;
  while (count < max_count && off < len && len - off >= (size_t)min_free) {
    ssize_t n = read(fd, (char *)data + off, len - off);
    int err = n < 0 ? errno : n < FUSE_IN_HEADER_SIZE ? EIO : 0; // too short to be a request
    if (err == EINTR) continue;
    if (err && count > 0) break; // hand over what we have; the next call sees the error again
    if (err == EAGAIN && spin_us > 0) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (deadline.tv_sec == 0 && deadline.tv_nsec == 0) {
        int64_t ns = now.tv_nsec + spin_us * 1000;
        deadline.tv_sec = now.tv_sec + ns / 1000000000;
        deadline.tv_nsec = ns % 1000000000;
      }
      if (now.tv_sec < deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec < deadline.tv_nsec)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        continue;
      }
    }
    if (err == EAGAIN) return number(env, 0);
    // The connection has ended: unmounted (ENODEV), or aborted (ECONNABORTED with
    // FUSE_ABORT_ERROR; a read racing with any end of the connection may also see it).
    if (err == ENODEV || err == ECONNABORTED) return number(env, -err);
    if (err) return throw_errno(env, err, "read", NULL);
    count++;
    off = (off + (size_t)n + 7) & ~(size_t)7; // the next request starts 8-byte aligned
  }
  return number(env, count);
}

// ---------------------------------------------------------------------------------------------
// FUSE device: readiness on the Node event loop

// The uv handle and the JS handle object each own one reference: the object may be collected
// while the poll runs (its callback keeps working), and pollStop may be called after close.
typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_async_context async;
  napi_async_cleanup_hook_handle teardown;
  bool closing;
  bool env_gone; // set at env teardown: the env then frees our reference and context itself
  int owners;
} Watch;

static const napi_type_tag WATCH_TAG = { 0x6370667377617463ULL, 0x9e3779b97f4a7c15ULL };

static void watch_release (Watch *w) {
  if (--w->owners == 0) free(w);
}

static void on_closed (uv_handle_t *h) {
  Watch *w = h->data;
  if (!w->env_gone && w->callback) napi_delete_reference(w->env, w->callback);
  if (!w->env_gone && w->async) napi_async_destroy(w->env, w->async);
  if (w->teardown) napi_remove_async_cleanup_hook(w->teardown); // lets a worker's env finish
  watch_release(w);
}

static void watch_close (Watch *w) {
  if (w->closing) return;
  w->closing = true;
  uv_close((uv_handle_t *)&w->poll, on_closed);
}

// A worker (or the main env) is being torn down with the poll still open: a uv handle left
// open would make Node's final loop close abort, so close it; Node waits for on_closed.
static void on_teardown (napi_async_cleanup_hook_handle h, void *arg) {
  Watch *w = arg;
  (void)h;
  w->env_gone = true;
  watch_close(w);
}

static void on_finalize (napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  watch_release(data);
}

// An exception thrown by the JS callback is pending in the env with no JS frame to return it
// to: hand it to process 'uncaughtException', as Node does for its own callbacks.
static void report_uncaught (napi_env env) {
  bool pending = false;
  napi_value e;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
      napi_get_and_clear_last_exception(env, &e) == napi_ok) napi_fatal_exception(env, e);
}

// libuv calls this with status 0 when the fd is readable, or UV_EBADF (having stopped the
// handle) when poll reports POLLERR, which /dev/fuse does once the connection has ended.
// napi_make_callback runs the function in a callback scope: async hooks see the context, and
// process.nextTick callbacks and promise reactions run when it returns.
static void on_readable (uv_poll_t *h, int status, int events) {
  Watch *w = h->data;
  napi_env env = w->env;
  napi_handle_scope scope;
  napi_value cb, recv, arg, result;
  (void)events;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  // The receiver must be an object (napi_make_callback converts it): use globalThis.
  if (napi_get_reference_value(env, w->callback, &cb) == napi_ok && napi_get_global(env, &recv) == napi_ok &&
      napi_create_int32(env, status, &arg) == napi_ok &&
      napi_make_callback(env, w->async, recv, cb, 1, &arg, &result) != napi_ok) report_uncaught(env);
  napi_close_handle_scope(env, scope);
}

// Fills in everything JS-side; on failure the caller closes the uv handle.
static bool watch_setup (napi_env env, Watch *w, napi_value handle, napi_value cb) {
  napi_value name;
  TRYB(napi_type_tag_object(env, handle, &WATCH_TAG));
  TRYB(napi_create_reference(env, cb, 1, &w->callback));
  TRYB(napi_create_string_utf8(env, "cpfs:fusePoll", NAPI_AUTO_LENGTH, &name));
  TRYB(napi_async_init(env, handle, name, &w->async));
  TRYB(napi_add_async_cleanup_hook(env, on_teardown, w, &w->teardown));
  int err = uv_poll_start(&w->poll, UV_READABLE, on_readable);
  if (err) { throw_errno(env, -err, "uv_poll_start", NULL); return false; }
  TRYB(napi_wrap(env, handle, w, on_finalize, NULL, NULL));
  w->owners = 2; // from here on the JS object owns a reference too
  return true;
}

// pollStart(fd, onReadable) -> handle
static napi_value js_poll_start (napi_env env, napi_callback_info info) {
  napi_value argv[2], handle;
  uv_loop_t *loop;
  int fd;
  bool ok;
  if (!get_args(env, info, 2, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !is_type(env, argv[1], napi_function, &ok)) return NULL;
  if (!ok) { bad_arg(env, false, "onReadable", "a function"); return NULL; }
  TRY(napi_get_uv_event_loop(env, &loop));
  TRY(napi_create_object(env, &handle));
  Watch *w = calloc(1, sizeof *w);
  if (!w) return throw_errno(env, ENOMEM, "calloc", NULL);
  w->env = env;
  w->owners = 1; // the uv handle's, released in on_closed
  w->poll.data = w;
  int err = uv_poll_init(loop, &w->poll, fd);
  if (err) { free(w); return throw_errno(env, -err, "uv_poll_init", NULL); }
  if (!watch_setup(env, w, handle, argv[1])) { watch_close(w); return NULL; }
  return handle;
}

// pollStop(handle): stops and closes; the memory goes in on_closed / on_finalize. Idempotent.
static napi_value js_poll_stop (napi_env env, napi_callback_info info) {
  napi_value argv[1];
  bool ok;
  void *w;
  if (!get_args(env, info, 1, argv) || !is_type(env, argv[0], napi_object, &ok)) return NULL;
  if (ok) TRY(napi_check_object_type_tag(env, argv[0], &WATCH_TAG, &ok));
  if (!ok) { bad_arg(env, false, "handle", "a handle returned by pollStart"); return NULL; }
  TRY(napi_unwrap(env, argv[0], &w));
  watch_close(w);
  return undefined(env);
}

// ---------------------------------------------------------------------------------------------
// openDirBeneath

// One openat2(2) that resolves rel below root and follows no symlink on the way, magic links
// (/proc/PID/fd) included, nor leaves root by '..' (kernel 5.6+). The kernel checks every
// component in the same walk that opens the result, so a directory swapped for a symlink
// while cpfs works can never redirect it (an lstat per component, then an open by path,
// could be raced: issue 18). Returns the fd, or -errno.
static int openat2_beneath (int root, const char *rel, int flags) {
  static bool missing = false; // ENOSYS once: the kernel predates openat2; walk from then on
  if (missing) return -ENOSYS;
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = (uint64_t)flags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
  if (fd >= 0) return fd;
  if (errno == ENOSYS) missing = true;
  return -errno;
}

// Opens rel below root with no symlink followed at any depth: one openat2 when the kernel has
// it; otherwise, and for paths longer than PATH_MAX or to learn which component failed, one
// component at a time with O_NOFOLLOW. '..' and empty components are refused (EINVAL).
// Returns the fd or -errno; on failure *bad is the length of the prefix of rel that failed.
static int walk_beneath (int root, char *rel, size_t *bad) {
  const int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  size_t len = strlen(rel);
  if (len > 0 && rel[0] != '/' && rel[len - 1] != '/' && strstr(rel, "..") == NULL && strstr(rel, "//") == NULL) {
    int fd = openat2_beneath(root, rel, flags);
    if (fd >= 0) return fd;
    // Only a failure takes the slow walk: it names the component that failed.
  }
  if (rel[0] == '\0' || strcmp(rel, ".") == 0) {
    int fd = openat(root, ".", flags); // a new fd, so the caller always closes what it gets
    *bad = strlen(rel);
    return fd < 0 ? -errno : fd;
  }
  int cur = root;
  for (char *comp = rel;;) {
    char *slash = strchr(comp, '/');
    int next = -1, err = 0;
    if (slash) *slash = '\0';
    if (*comp == '\0' || strcmp(comp, "..") == 0) err = EINVAL;
    else if ((next = openat(cur, comp, flags)) < 0) err = errno; // before close() can change errno
    if (slash) *slash = '/';
    if (cur != root) close(cur);
    if (err) {
      *bad = (size_t)((slash ? slash : comp + strlen(comp)) - rel);
      return -err;
    }
    if (!slash) return next;
    cur = next;
    comp = slash + 1;
  }
}

// openDirBeneath(rootFd, rel) -> O_PATH fd
static napi_value js_open_dir_beneath (napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int root;
  size_t bad = 0;
  AUTOFREE char *rel = NULL;
  if (!get_args(env, info, 2, argv) || !arg_dirfd(env, argv[0], "rootFd", &root) ||
      !arg_str(env, argv[1], "rel", &rel)) return NULL;
  int fd = walk_beneath(root, rel, &bad);
  if (fd >= 0) return number(env, fd);
  rel[bad] = '\0';
  return throw_errno(env, -fd, "openat", *rel ? rel : ".");
}

// ---------------------------------------------------------------------------------------------
// Extended attributes: l*xattr on a path (never following a final symlink) or f*xattr on an fd

typedef struct {
  const char *path; // l*xattr when set, else f*xattr on fd
  int fd;
} XTarget;

static ssize_t x_get (const XTarget *t, const char *name, void *buf, size_t size) {
  return t->path ? lgetxattr(t->path, name, buf, size) : fgetxattr(t->fd, name, buf, size);
}

static ssize_t x_list (const XTarget *t, char *buf, size_t size) {
  return t->path ? llistxattr(t->path, buf, size) : flistxattr(t->fd, buf, size);
}

// A value (name set) or the name list (name NULL) into a heap buffer. The size is probed first
// and the value may grow before the real read (ERANGE): then probe again, a few times.
static ssize_t x_fetch (const XTarget *t, const char *name, char **out) {
  for (int tries = 0; tries < 8; tries++) {
    ssize_t size = name ? x_get(t, name, NULL, 0) : x_list(t, NULL, 0);
    if (size < 0) return -errno;
    if (!(*out = malloc(size ? (size_t)size : 1))) return -ENOMEM;
    if (size == 0) return 0; // a read of size 0 would be another probe, not a read
    ssize_t n = name ? x_get(t, name, *out, (size_t)size) : x_list(t, *out, (size_t)size);
    if (n >= 0) return n;
    int err = errno;
    free(*out);
    *out = NULL;
    if (err != ERANGE) return -err;
  }
  return -ERANGE;
}

// Reads the target from argv[0]: a path string (l* forms) or an fd (f* forms).
static bool arg_xtarget (napi_env env, napi_value v, bool by_path, XTarget *t, char **path) {
  t->path = NULL;
  t->fd = -1;
  if (!by_path) return arg_fd(env, v, "fd", &t->fd);
  if (!arg_str(env, v, "path", path)) return false;
  t->path = *path;
  return true;
}

// getxattr(target, name) -> Buffer | null (null when the attribute does not exist)
static napi_value xattr_get (napi_env env, napi_callback_info info, bool by_path) {
  napi_value argv[2], result;
  XTarget t;
  AUTOFREE char *path = NULL;
  AUTOFREE char *name = NULL;
  AUTOFREE char *value = NULL;
  if (!get_args(env, info, 2, argv) || !arg_xtarget(env, argv[0], by_path, &t, &path) ||
      !arg_str(env, argv[1], "name", &name)) return NULL;
  ssize_t n = x_fetch(&t, name, &value);
  if (n == -ENODATA) { TRY(napi_get_null(env, &result)); return result; }
  if (n < 0) return throw_errno(env, (int)-n, by_path ? "lgetxattr" : "fgetxattr", t.path);
  TRY(napi_create_buffer_copy(env, (size_t)n, value, NULL, &result));
  return result;
}

// listxattr(target) -> string[] (the kernel's list is NUL-terminated names back to back)
static napi_value xattr_list (napi_env env, napi_callback_info info, bool by_path) {
  napi_value argv[1], result, s;
  XTarget t;
  AUTOFREE char *path = NULL;
  AUTOFREE char *list = NULL;
  if (!get_args(env, info, 1, argv) || !arg_xtarget(env, argv[0], by_path, &t, &path)) return NULL;
  ssize_t n = x_fetch(&t, NULL, &list);
  if (n < 0) return throw_errno(env, (int)-n, by_path ? "llistxattr" : "flistxattr", t.path);
  TRY(napi_create_array(env, &result));
  uint32_t i = 0;
  for (const char *p = list, *end = list + n; p < end; i++) {
    size_t len = strnlen(p, (size_t)(end - p));
    TRY(napi_create_string_utf8(env, p, len, &s));
    TRY(napi_set_element(env, result, i, s));
    p += len + 1;
  }
  return result;
}

// setxattr(target, name, value, flags)
static napi_value xattr_set (napi_env env, napi_callback_info info, bool by_path) {
  napi_value argv[4];
  XTarget t;
  void *value;
  size_t size;
  int flags;
  AUTOFREE char *path = NULL;
  AUTOFREE char *name = NULL;
  if (!get_args(env, info, 4, argv) || !arg_xtarget(env, argv[0], by_path, &t, &path) ||
      !arg_str(env, argv[1], "name", &name) || !arg_buf(env, argv[2], "value", &value, &size) ||
      !arg_i32(env, argv[3], "flags", 0, INT32_MAX, &flags)) return NULL;
  int r = t.path ? lsetxattr(t.path, name, value, size, flags) : fsetxattr(t.fd, name, value, size, flags);
  if (r < 0) return throw_errno(env, errno, by_path ? "lsetxattr" : "fsetxattr", t.path);
  return undefined(env);
}

// removexattr(target, name)
static napi_value xattr_remove (napi_env env, napi_callback_info info, bool by_path) {
  napi_value argv[2];
  XTarget t;
  AUTOFREE char *path = NULL;
  AUTOFREE char *name = NULL;
  if (!get_args(env, info, 2, argv) || !arg_xtarget(env, argv[0], by_path, &t, &path) ||
      !arg_str(env, argv[1], "name", &name)) return NULL;
  int r = t.path ? lremovexattr(t.path, name) : fremovexattr(t.fd, name);
  if (r < 0) return throw_errno(env, errno, by_path ? "lremovexattr" : "fremovexattr", t.path);
  return undefined(env);
}

static napi_value js_lgetxattr (napi_env env, napi_callback_info info) { return xattr_get(env, info, true); }
static napi_value js_fgetxattr (napi_env env, napi_callback_info info) { return xattr_get(env, info, false); }
static napi_value js_llistxattr (napi_env env, napi_callback_info info) { return xattr_list(env, info, true); }
static napi_value js_flistxattr (napi_env env, napi_callback_info info) { return xattr_list(env, info, false); }
static napi_value js_lsetxattr (napi_env env, napi_callback_info info) { return xattr_set(env, info, true); }
static napi_value js_fsetxattr (napi_env env, napi_callback_info info) { return xattr_set(env, info, false); }
static napi_value js_lremovexattr (napi_env env, napi_callback_info info) { return xattr_remove(env, info, true); }
static napi_value js_fremovexattr (napi_env env, napi_callback_info info) { return xattr_remove(env, info, false); }

// ---------------------------------------------------------------------------------------------
// mknodat

static bool arg_dev (napi_env env, napi_value v, dev_t *dev) {
  int64_t x;
  if (!arg_int(env, v, "dev", 0, MAX_SAFE_INT, &x)) return false;
  *dev = (dev_t)x;
  return true;
}

// mknodat(dirFd, name, mode, dev)
static napi_value js_mknodat (napi_env env, napi_callback_info info) {
  napi_value argv[4];
  int dirfd;
  uint32_t mode;
  dev_t dev;
  AUTOFREE char *name = NULL;
  if (!get_args(env, info, 4, argv) || !arg_dirfd(env, argv[0], "dirFd", &dirfd) ||
      !arg_str(env, argv[1], "name", &name) || !arg_u32(env, argv[2], "mode", &mode) || !arg_dev(env, argv[3], &dev)) return NULL;
  if (mknodat(dirfd, name, (mode_t)mode, dev) < 0) return throw_errno(env, errno, "mknodat", shown(name));
  return undefined(env);
}

// ---------------------------------------------------------------------------------------------
// Times

// Seconds (any safe integer, negative before 1970) and nanoseconds in [0, 1e9) or
// UTIME_NOW / UTIME_OMIT, which tell the kernel to ignore the seconds.
static bool arg_timespec (napi_env env, napi_value vsec, napi_value vnsec, const char *name, struct timespec *ts) {
  int64_t sec, nsec;
  if (!arg_int(env, vsec, name, -MAX_SAFE_INT, MAX_SAFE_INT, &sec) ||
      !arg_int(env, vnsec, "nsec", 0, UTIME_NOW > UTIME_OMIT ? UTIME_NOW : UTIME_OMIT, &nsec)) return false;
  if (nsec > 999999999 && nsec != UTIME_NOW && nsec != UTIME_OMIT)
    return bad_arg(env, true, "nsec", "in [0, 999999999], UTIME_NOW or UTIME_OMIT");
  ts->tv_sec = (time_t)sec;
  ts->tv_nsec = (long)nsec;
  return true;
}

// utimensat(dirFd, name, atimeSec, atimeNsec, mtimeSec, mtimeNsec, flags)
static napi_value js_utimensat (napi_env env, napi_callback_info info) {
  napi_value argv[7];
  int dirfd, flags;
  struct timespec ts[2];
  AUTOFREE char *name = NULL;
  if (!get_args(env, info, 7, argv) || !arg_dirfd(env, argv[0], "dirFd", &dirfd) ||
      !arg_str(env, argv[1], "name", &name) || !arg_timespec(env, argv[2], argv[3], "atimeSec", &ts[0]) ||
      !arg_timespec(env, argv[4], argv[5], "mtimeSec", &ts[1]) ||
      !arg_i32(env, argv[6], "flags", 0, INT32_MAX, &flags)) return NULL;
  if (utimensat(dirfd, name, ts, flags) < 0) return throw_errno(env, errno, "utimensat", shown(name));
  return undefined(env);
}

// futimens(fd, atimeSec, atimeNsec, mtimeSec, mtimeNsec)
static napi_value js_futimens (napi_env env, napi_callback_info info) {
  napi_value argv[5];
  int fd;
  struct timespec ts[2];
  if (!get_args(env, info, 5, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !arg_timespec(env, argv[1], argv[2], "atimeSec", &ts[0]) ||
      !arg_timespec(env, argv[3], argv[4], "mtimeSec", &ts[1])) return NULL;
  if (futimens(fd, ts) < 0) return throw_errno(env, errno, "futimens", NULL);
  return undefined(env);
}

// ---------------------------------------------------------------------------------------------
// File contents and names

// lseek(fd, offset, whence) -> offset, or -1 for ENXIO (SEEK_DATA / SEEK_HOLE past the data)
static napi_value js_lseek (napi_env env, napi_callback_info info) {
  napi_value argv[3];
  int fd, whence;
  int64_t offset;
  if (!get_args(env, info, 3, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !arg_int(env, argv[1], "offset", -MAX_SAFE_INT, MAX_SAFE_INT, &offset) ||
      !arg_i32(env, argv[2], "whence", 0, INT32_MAX, &whence)) return NULL;
  off_t r = lseek(fd, (off_t)offset, whence);
  if (r < 0 && errno == ENXIO) return number(env, -1);
  if (r < 0) return throw_errno(env, errno, "lseek", NULL);
  return number(env, r);
}

// fallocate(fd, mode, offset, len)
static napi_value js_fallocate (napi_env env, napi_callback_info info) {
  napi_value argv[4];
  int fd, mode;
  int64_t offset, len;
  if (!get_args(env, info, 4, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !arg_i32(env, argv[1], "mode", 0, INT32_MAX, &mode) ||
      !arg_int(env, argv[2], "offset", 0, MAX_SAFE_INT, &offset) ||
      !arg_int(env, argv[3], "len", 0, MAX_SAFE_INT, &len)) return NULL;
  if (fallocate(fd, mode, (off_t)offset, (off_t)len) < 0) return throw_errno(env, errno, "fallocate", NULL);
  return undefined(env);
}

// syncfs(fd)
static napi_value js_syncfs (napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int fd;
  if (!get_args(env, info, 1, argv) || !arg_fd(env, argv[0], "fd", &fd)) return NULL;
  if (syncfs(fd) < 0) return throw_errno(env, errno, "syncfs", NULL);
  return undefined(env);
}

// mallocTrim() -> boolean: glibc's malloc_trim(0). Memory freed inside the allocator's arenas
// (LevelDB's memtables and blocks, small Buffers) stays resident until the arena's top is free;
// malloc_trim gives every free page back (madvise), wherever it is. true when some was released.
static napi_value js_malloc_trim (napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
#ifdef __GLIBC__
  TRY(napi_get_boolean(env, malloc_trim(0) != 0, &r));
#else
  TRY(napi_get_boolean(env, false, &r)); // another libc: nothing to ask
#endif
  return r;
}

// ---------------------------------------------------------------------------------------------
// The request path: calls made for (nearly) every FUSE request, so they avoid Node's general
// machinery (fs.Stats objects, BigInts, argument objects) and heap allocations.

// Copy a JS string into buf (NUL-terminated) without allocating; false (TypeError thrown, or
// RangeError when longer than the buffer) on failure.
static bool arg_str_into (napi_env env, napi_value v, const char *name, char *buf, size_t size) {
  bool ok;
  size_t got;
  if (!is_type(env, v, napi_string, &ok)) return false;
  if (!ok) return bad_arg(env, false, name, "a string");
  TRYB(napi_get_value_string_utf8(env, v, buf, size, &got));
  if (got >= size - 1) return bad_arg(env, true, name, "a shorter string");
  if (strlen(buf) != got) return bad_arg(env, false, name, "a string without null bytes");
  return true;
}

// lstatInto(path, out: Float64Array(16)) -> boolean: lstat without following a final symlink,
// the fields as plain numbers: mode, uid, gid, size, blocks, nlink, ino, rdev, atime sec/nsec,
// mtime sec/nsec, ctime sec/nsec, dev. false when nothing is there (ENOENT, ENOTDIR, ELOOP).
static napi_value js_lstat_into (napi_env env, napi_callback_info info) {
  napi_value argv[2];
  char path[8192];
  bool ok;
  napi_typedarray_type type;
  size_t n;
  void *data;
  if (!get_args(env, info, 2, argv) || !arg_str_into(env, argv[0], "path", path, sizeof path)) return NULL;
  TRY(napi_is_typedarray(env, argv[1], &ok));
  if (ok) TRY(napi_get_typedarray_info(env, argv[1], &type, &n, &data, NULL, NULL));
  if (!ok || type != napi_float64_array || n < 16) { bad_arg(env, false, "out", "a Float64Array of 16"); return NULL; }
  struct stat st;
  napi_value result;
  if (lstat(path, &st) < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
      TRY(napi_get_boolean(env, false, &result));
      return result;
    }
    return throw_errno(env, errno, "lstat", path);
  }
  double *o = data;
  o[0] = st.st_mode; o[1] = st.st_uid; o[2] = st.st_gid; o[3] = (double)st.st_size;
  o[4] = (double)st.st_blocks; o[5] = (double)st.st_nlink; o[6] = (double)st.st_ino; o[7] = (double)st.st_rdev;
  o[8] = (double)st.st_atim.tv_sec; o[9] = st.st_atim.tv_nsec;
  o[10] = (double)st.st_mtim.tv_sec; o[11] = st.st_mtim.tv_nsec;
  o[12] = (double)st.st_ctim.tv_sec; o[13] = st.st_ctim.tv_nsec;
  o[14] = (double)st.st_dev; o[15] = 0;
  TRY(napi_get_boolean(env, true, &result));
  return result;
}

// writeReply(fd, buf, len) -> bytes written: one write(2) of buf[0..len) (a FUSE reply).
static napi_value js_write_reply (napi_env env, napi_callback_info info) {
  napi_value argv[3];
  int fd;
  void *data;
  size_t len;
  int64_t n;
  if (!get_args(env, info, 3, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !arg_buf(env, argv[1], "buf", &data, &len) ||
      !arg_int(env, argv[2], "len", 0, (int64_t)len, &n)) return NULL;
  ssize_t w;
  do w = write(fd, data, (size_t)n); while (w < 0 && errno == EINTR);
  if (w < 0) return throw_errno(env, errno, "write", NULL);
  return number(env, w);
}

// writeReply2(fd, head, data, dataLen) -> bytes: a reply in two pieces (header + data) in one writev(2).
static napi_value js_write_reply2 (napi_env env, napi_callback_info info) {
  napi_value argv[4];
  int fd;
  void *h, *d;
  size_t hl, dl;
  int64_t n;
  if (!get_args(env, info, 4, argv) || !arg_fd(env, argv[0], "fd", &fd) ||
      !arg_buf(env, argv[1], "head", &h, &hl) || !arg_buf(env, argv[2], "data", &d, &dl) ||
      !arg_int(env, argv[3], "dataLen", 0, (int64_t)dl, &n)) return NULL;
  struct iovec iov[2] = { { .iov_base = h, .iov_len = hl }, { .iov_base = d, .iov_len = (size_t)n } };
  ssize_t w;
  do w = writev(fd, iov, 2); while (w < 0 && errno == EINTR);
  if (w < 0) return throw_errno(env, errno, "writev", NULL);
  return number(env, w);
}

// ---------------------------------------------------------------------------------------------
// Module

// The platform's values, so TypeScript never hard-codes a number that could differ.
static const struct { const char *name; int64_t value; } CONSTANTS[] = {
#define C(x) { #x, (int64_t)(x) }
  C(O_RDONLY), C(O_WRONLY), C(O_RDWR), C(O_CREAT), C(O_EXCL), C(O_TRUNC), C(O_APPEND),
  C(O_NONBLOCK), C(O_DIRECTORY), C(O_NOFOLLOW), C(O_CLOEXEC), C(O_PATH), C(O_NOATIME),
  C(AT_FDCWD), C(AT_SYMLINK_NOFOLLOW), C(AT_EMPTY_PATH), C(AT_REMOVEDIR),
  C(UTIME_NOW), C(UTIME_OMIT),
  C(SEEK_SET), C(SEEK_CUR), C(SEEK_END), C(SEEK_DATA), C(SEEK_HOLE),
  C(RENAME_NOREPLACE), C(RENAME_EXCHANGE), C(RENAME_WHITEOUT),
  C(XATTR_CREATE), C(XATTR_REPLACE),
  C(MS_RDONLY), C(MS_NOSUID), C(MS_NODEV), C(MS_NOEXEC), C(MS_NOATIME), C(MS_NODIRATIME),
  C(MNT_FORCE), C(MNT_DETACH), C(MNT_EXPIRE), C(UMOUNT_NOFOLLOW),
  C(FALLOC_FL_KEEP_SIZE), C(FALLOC_FL_PUNCH_HOLE), C(FALLOC_FL_ZERO_RANGE),
  C(FALLOC_FL_COLLAPSE_RANGE), C(FALLOC_FL_INSERT_RANGE),
  C(S_IFMT), C(S_IFSOCK), C(S_IFLNK), C(S_IFREG), C(S_IFBLK), C(S_IFDIR), C(S_IFCHR), C(S_IFIFO),
  C(ENODEV), C(UV_EBADF),
#undef C
};

static bool add_constants (napi_env env, napi_value exports) {
  napi_value obj, v;
  TRYB(napi_create_object(env, &obj));
  for (size_t i = 0; i < sizeof CONSTANTS / sizeof CONSTANTS[0]; i++) {
    TRYB(napi_create_int64(env, CONSTANTS[i].value, &v));
    if (!set_prop(env, obj, CONSTANTS[i].name, v)) return false;
  }
  TRYB(napi_object_freeze(env, obj));
  return set_prop(env, exports, "constants", obj);
}

NAPI_MODULE_INIT () {
#define F(js, c) { js, NULL, c, NULL, NULL, NULL, napi_enumerable, NULL }
  static const napi_property_descriptor fns[] = {
    F("fuseMount", js_fuse_mount), F("fusermountOpen", js_fusermount_open), F("umount2", js_umount2),
    F("setNonBlocking", js_set_non_blocking), F("readBatch", js_read_batch),
    F("pollStart", js_poll_start), F("pollStop", js_poll_stop),
    F("openDirBeneath", js_open_dir_beneath),
    F("lgetxattr", js_lgetxattr), F("llistxattr", js_llistxattr), F("lsetxattr", js_lsetxattr),
    F("lremovexattr", js_lremovexattr), F("fgetxattr", js_fgetxattr), F("flistxattr", js_flistxattr),
    F("fsetxattr", js_fsetxattr), F("fremovexattr", js_fremovexattr),
    F("mknodat", js_mknodat),
    F("utimensat", js_utimensat), F("futimens", js_futimens), F("lseek", js_lseek),
    F("fallocate", js_fallocate), F("syncfs", js_syncfs), F("mallocTrim", js_malloc_trim),
    F("lstatInto", js_lstat_into), F("writeReply", js_write_reply), F("writeReply2", js_write_reply2),
  };
#undef F
  TRY(napi_define_properties(env, exports, sizeof fns / sizeof fns[0], fns));
  if (!add_constants(env, exports)) return NULL;
  if (!underneath_register(env, exports)) return NULL;
  return exports;
}
