// Underneath: fanotify on the real directory under a cpfs mount (src/daemon/underneath.ts).
//
// A process whose cwd (or an open descriptor) was inside the directory before the mount still
// reaches the real files, past cpfs. Two fanotify groups watch every directory of the tree by
// inode marks (FAN_EVENT_ON_CHILD), placed by JavaScript through underneathMark:
// - a permission group (FAN_CLASS_CONTENT, FAN_OPEN_PERM): an open by another process is held
//   until JavaScript has kept the file's content (or until a timeout), so that a truncating
//   open (`echo x > f`) or a `sed -i` cannot destroy bytes the history never saw;
// - a notification group (FAN_REPORT_DFID_NAME): what changed, by directory handle and name.
// Both are read by a thread of their own, because the daemon's own opens of real files (every
// read served from the real directory, every plan) raise permission events too, and those
// must be answered while the JavaScript thread is blocked in that very open: the thread allows
// them at once, by pid, without JavaScript. Everything else is queued for JavaScript, which
// drains the queue when the thread signals it (a thread-safe function).
//
// Written from the fanotify(7), fanotify_init(2) and fanotify_mark(2) man pages.
#define NAPI_VERSION 8
#include <node_api.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "underneath.h"

enum { EV_OPEN = 1, EV_CHANGE = 2, EV_OVERFLOW = 3, EV_TIMEOUT = 4, EV_RENAME = 5 };

typedef struct {
  int kind;
  uint64_t mask;
  int pid;
  uint32_t id;
  char *where; // EV_OPEN: the file's path; EV_CHANGE, EV_RENAME: the directory's handle, in hex
  char *name;  // EV_CHANGE: the entry's name ("." for the directory itself); EV_RENAME: the old name
  char *where2, *name2; // EV_RENAME: the new directory and name
} Event;

typedef struct {
  uint32_t id;
  int fd;
  int64_t since_ms;
} Held;

typedef struct {
  int perm_fd, note_fd, wake[2];
  pid_t self;
  int timeout_ms;
  pthread_t thread;
  bool running;
  pthread_mutex_t mu; // guards everything below
  Event *queue; size_t nqueue, capqueue;
  Held *held; size_t nheld, capheld;
  uint32_t next_id;
  bool signalled, stopped;
  napi_threadsafe_function tsfn;
} Under;

static const napi_type_tag UNDER_TAG = { 0x756e6465726e6561ULL, 0x7468636670730001ULL };

static int64_t now_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void respond (int group, int fd, uint32_t verdict) {
  struct fanotify_response r = { .fd = fd, .response = verdict };
  // Nothing useful to do if it fails: the kernel allows every pending event when the group closes.
  if (write(group, &r, sizeof r) < 0) {}
  close(fd);
}

// Called with mu held.
static void push (Under *u, Event ev) {
  if (u->nqueue == u->capqueue) {
    size_t cap = u->capqueue ? u->capqueue * 2 : 64;
    Event *q = realloc(u->queue, cap * sizeof *q);
    if (!q) { free(ev.where); free(ev.name); free(ev.where2); free(ev.name2); return; }
    u->queue = q;
    u->capqueue = cap;
  }
  u->queue[u->nqueue++] = ev;
  if (!u->signalled && u->tsfn) {
    u->signalled = true;
    napi_call_threadsafe_function(u->tsfn, NULL, napi_tsfn_nonblocking);
  }
}

static char *fd_path (int fd) {
  char link[64], buf[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, buf, sizeof buf - 1);
  if (n < 0) return NULL;
  buf[n] = 0;
  return strdup(buf);
}

static void read_perm (Under *u) {
  char buf[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
  for (;;) {
    ssize_t n = read(u->perm_fd, buf, sizeof buf);
    if (n <= 0) return;
    struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)buf;
    for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
      if (m->vers != FANOTIFY_METADATA_VERSION) continue;
      if (m->fd < 0) continue;
      if (!(m->mask & FAN_OPEN_PERM)) { close(m->fd); continue; }
      // The daemon's own opens (its reads of the real directory, its plans): at once.
      if (m->pid == u->self) { respond(u->perm_fd, m->fd, FAN_ALLOW); continue; }
      pthread_mutex_lock(&u->mu);
      if (u->nheld == u->capheld) {
        size_t cap = u->capheld ? u->capheld * 2 : 16;
        Held *h = realloc(u->held, cap * sizeof *h);
        if (!h) { pthread_mutex_unlock(&u->mu); respond(u->perm_fd, m->fd, FAN_ALLOW); continue; }
        u->held = h;
        u->capheld = cap;
      }
      uint32_t id = ++u->next_id;
      u->held[u->nheld++] = (Held){ id, m->fd, now_ms() };
      push(u, (Event){ EV_OPEN, m->mask, m->pid, id, fd_path(m->fd), NULL, NULL, NULL });
      pthread_mutex_unlock(&u->mu);
    }
  }
}

static const char HEX[] = "0123456789abcdef";

// A file handle as one string: its type (4 bytes, little-endian) then its bytes, in hex. `out`
// has room for 2 * (n + 4) + 1 characters. Events and marks name directories this way.
static size_t handle_hex (int type, const unsigned char *bytes, uint32_t n, char *out) {
  size_t k = 0;
  uint32_t t = (uint32_t)type;
  for (int i = 0; i < 4; i++) { uint8_t b = (uint8_t)(t >> (8 * i)); out[k++] = HEX[b >> 4]; out[k++] = HEX[b & 15]; }
  for (uint32_t i = 0; i < n; i++) { out[k++] = HEX[bytes[i] >> 4]; out[k++] = HEX[bytes[i] & 15]; }
  out[k] = 0;
  return k;
}

static void read_notes (Under *u) {
  char buf[16384] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
  for (;;) {
    ssize_t n = read(u->note_fd, buf, sizeof buf);
    if (n <= 0) return;
    struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)buf;
    for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
      if (m->vers != FANOTIFY_METADATA_VERSION) continue;
      if (m->fd >= 0) close(m->fd); // not with FID reporting, but never leak one
      if (m->mask & FAN_Q_OVERFLOW) {
        pthread_mutex_lock(&u->mu);
        push(u, (Event){ EV_OVERFLOW, m->mask, 0, 0, NULL, NULL, NULL, NULL });
        pthread_mutex_unlock(&u->mu);
        continue;
      }
      if (m->pid == u->self) continue;
      // Info records follow the metadata: the parent directory (fsid, file handle) and the
      // entry's name; a rename (FAN_RENAME) has two, the old and the new.
      char *dirs[2] = { NULL, NULL }, *names[2] = { NULL, NULL };
      char *p = (char *)m + m->metadata_len, *end = (char *)m + m->event_len;
      while (p + sizeof(struct fanotify_event_info_header) <= end) {
        struct fanotify_event_info_header *h = (struct fanotify_event_info_header *)p;
        if (h->len == 0 || p + h->len > end) break;
        int slot = h->info_type == FAN_EVENT_INFO_TYPE_NEW_DFID_NAME ? 1
          : h->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME || h->info_type == FAN_EVENT_INFO_TYPE_OLD_DFID_NAME ? 0 : -1;
        if (slot >= 0 && !dirs[slot]) {
          struct fanotify_event_info_fid *fid = (struct fanotify_event_info_fid *)h;
          struct file_handle *fh = (struct file_handle *)fid->handle;
          dirs[slot] = malloc(2 * (fh->handle_bytes + 4) + 1);
          // What name_to_handle_at gave for the marked directory (js_mark).
          if (dirs[slot]) handle_hex(fh->handle_type, (const unsigned char *)fh + sizeof *fh, fh->handle_bytes, dirs[slot]);
          names[slot] = strdup((const char *)fh + sizeof *fh + fh->handle_bytes);
        }
        p += h->len;
      }
      if (!dirs[0] || !names[0]) { free(dirs[0]); free(names[0]); free(dirs[1]); free(names[1]); continue; }
      bool rename = (m->mask & FAN_RENAME) && dirs[1] && names[1];
      if (!rename) { free(dirs[1]); free(names[1]); dirs[1] = names[1] = NULL; }
      pthread_mutex_lock(&u->mu);
      push(u, (Event){ rename ? EV_RENAME : EV_CHANGE, m->mask, m->pid, 0, dirs[0], names[0], dirs[1], names[1] });
      pthread_mutex_unlock(&u->mu);
    }
  }
}

static void expire (Under *u) {
  int64_t now = now_ms();
  pthread_mutex_lock(&u->mu);
  for (size_t i = 0; i < u->nheld;) {
    if (now - u->held[i].since_ms < u->timeout_ms) { i++; continue; }
    respond(u->perm_fd, u->held[i].fd, FAN_ALLOW);
    push(u, (Event){ EV_TIMEOUT, 0, 0, u->held[i].id, NULL, NULL, NULL, NULL });
    u->held[i] = u->held[--u->nheld];
  }
  pthread_mutex_unlock(&u->mu);
}

static void *run (void *arg) {
  Under *u = arg;
  struct pollfd fds[3] = { { u->perm_fd, POLLIN, 0 }, { u->note_fd, POLLIN, 0 }, { u->wake[0], POLLIN, 0 } };
  for (;;) {
    int r = poll(fds, 3, 100);
    if (r < 0 && errno != EINTR) break;
    if (fds[2].revents) break;
    if (fds[0].revents & POLLIN) read_perm(u);
    if (fds[1].revents & POLLIN) read_notes(u);
    expire(u);
  }
  return NULL;
}

// ---- JavaScript side ------------------------------------------------------------------------

static napi_value fail (napi_env env, const char *syscall, int err) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", syscall, strerror(err));
  napi_value jmsg, jcode, e;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &jmsg);
  const char *code = strerrorname_np(err); // the errno's name, as Node's fs errors carry
  if (!code) code = "EIO";
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &jcode);
  napi_create_error(env, jcode, jmsg, &e);
  napi_throw(env, e);
  return NULL;
}

static Under *unwrap (napi_env env, napi_value v) {
  bool ok = false;
  void *p = NULL;
  if (napi_check_object_type_tag(env, v, &UNDER_TAG, &ok) != napi_ok || !ok || napi_unwrap(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "not an underneath handle");
    return NULL;
  }
  return p;
}

static void call_js (napi_env env, napi_value cb, void *ctx, void *data) {
  (void)ctx; (void)data;
  if (!env || !cb) return;
  napi_value undef;
  napi_get_undefined(env, &undef);
  napi_call_function(env, undef, cb, 0, NULL, NULL);
}

static void stop (Under *u) {
  if (!u->running) return;
  u->running = false;
  if (write(u->wake[1], "x", 1) < 0) {}
  pthread_join(u->thread, NULL);
  pthread_mutex_lock(&u->mu);
  for (size_t i = 0; i < u->nheld; i++) respond(u->perm_fd, u->held[i].fd, FAN_ALLOW);
  u->nheld = 0;
  pthread_mutex_unlock(&u->mu);
  close(u->perm_fd);
  close(u->note_fd);
  close(u->wake[0]);
  close(u->wake[1]);
}

static void finalize (napi_env env, void *data, void *hint) {
  (void)env; (void)hint;
  Under *u = data;
  stop(u);
  if (u->tsfn) napi_release_threadsafe_function(u->tsfn, napi_tsfn_abort);
  for (size_t i = 0; i < u->nqueue; i++) { free(u->queue[i].where); free(u->queue[i].name); free(u->queue[i].where2); free(u->queue[i].name2); }
  free(u->queue);
  free(u->held);
  pthread_mutex_destroy(&u->mu);
  free(u);
}

// underneathStart(onReady: () => void, timeoutMs: number): handle
static napi_value js_start (napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  napi_valuetype t;
  if (argc < 2 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_function) { napi_throw_type_error(env, NULL, "underneathStart(onReady, timeoutMs)"); return NULL; }
  int32_t timeout = 0;
  if (napi_get_value_int32(env, argv[1], &timeout) != napi_ok || timeout < 1) { napi_throw_range_error(env, NULL, "timeoutMs must be a positive integer"); return NULL; }
  int perm = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS,
    O_RDONLY | O_NONBLOCK | O_LARGEFILE | O_CLOEXEC | O_NOATIME);
  if (perm < 0) return fail(env, "fanotify_init (permission events)", errno);
  int note = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS | FAN_REPORT_DFID_NAME,
    O_RDONLY | O_CLOEXEC);
  if (note < 0) { int e = errno; close(perm); return fail(env, "fanotify_init (directory events)", e); }
  Under *u = calloc(1, sizeof *u);
  if (!u) { close(perm); close(note); return fail(env, "calloc", ENOMEM); }
  u->perm_fd = perm;
  u->note_fd = note;
  u->self = getpid();
  u->timeout_ms = timeout;
  pthread_mutex_init(&u->mu, NULL);
  if (pipe2(u->wake, O_CLOEXEC) < 0) { int e = errno; close(perm); close(note); free(u); return fail(env, "pipe2", e); }
  napi_value name, obj;
  napi_create_string_utf8(env, "cpfs:underneath", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[0], NULL, name, 0, 1, NULL, NULL, NULL, call_js, &u->tsfn) != napi_ok) {
    close(perm); close(note); close(u->wake[0]); close(u->wake[1]); free(u);
    return fail(env, "napi_create_threadsafe_function", EIO);
  }
  // The thread must not keep the event loop alive: the daemon ends when its mount does.
  napi_unref_threadsafe_function(env, u->tsfn);
  napi_create_object(env, &obj);
  napi_type_tag_object(env, obj, &UNDER_TAG);
  napi_wrap(env, obj, u, finalize, NULL, NULL);
  int err = pthread_create(&u->thread, NULL, run, u);
  if (err) return fail(env, "pthread_create", err);
  u->running = true;
  return obj;
}

// underneathMark(handle, dirFd, rel): marks directory rel below dirFd (following no symlink
// in its last component); returns its handle in hex, as change events name it.
static napi_value js_mark (napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 3) { napi_throw_type_error(env, NULL, "underneathMark(handle, dirFd, rel)"); return NULL; }
  Under *u = unwrap(env, argv[0]);
  if (!u) return NULL;
  int32_t dirfd;
  if (napi_get_value_int32(env, argv[1], &dirfd) != napi_ok) { napi_throw_type_error(env, NULL, "dirFd must be a number"); return NULL; }
  char rel[4096];
  size_t len = 0;
  if (napi_get_value_string_utf8(env, argv[2], rel, sizeof rel, &len) != napi_ok || len >= sizeof rel - 1) { napi_throw_type_error(env, NULL, "rel must be a string shorter than PATH_MAX"); return NULL; }
  const char *path = len ? rel : ".";
  unsigned flags = FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW | FAN_MARK_ONLYDIR;
  if (fanotify_mark(u->perm_fd, flags, FAN_OPEN_PERM | FAN_EVENT_ON_CHILD, dirfd, path) < 0) return fail(env, "fanotify_mark (permission events)", errno);
  uint64_t mask = FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_RENAME | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_ATTRIB | FAN_ONDIR | FAN_EVENT_ON_CHILD;
  if (fanotify_mark(u->note_fd, flags, mask, dirfd, path) < 0) return fail(env, "fanotify_mark (directory events)", errno);
  // A file_handle ends in a flexible array: room for the largest handle after it.
  union { struct file_handle fh; unsigned char room[sizeof(struct file_handle) + MAX_HANDLE_SZ]; } h;
  h.fh.handle_bytes = MAX_HANDLE_SZ;
  int mount_id;
  if (name_to_handle_at(dirfd, path, &h.fh, &mount_id, 0) < 0) return fail(env, "name_to_handle_at", errno);
  const unsigned char *bytes = h.room + sizeof(struct file_handle);
  char hex[2 * (MAX_HANDLE_SZ + 4) + 1];
  size_t k = handle_hex(h.fh.handle_type, bytes, h.fh.handle_bytes, hex);
  napi_value out;
  napi_create_string_utf8(env, hex, k, &out);
  return out;
}

// openTreeClone(dirFd): a private copy of the mount dirFd is on, rooted at dirFd, with the
// mounts below it (open_tree(2) with OPEN_TREE_CLONE | AT_RECURSIVE). The daemon reaches the
// real directory through it, and underneathIgnoreMount exempts it from the permission group:
// its own opens then raise no event at all.
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE 0x00000400
#endif
#ifndef FAN_MARK_IGNORED_SURV_MODIFY
#define FAN_MARK_IGNORED_SURV_MODIFY 0x00000040
#endif
static napi_value js_open_tree_clone (napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  int32_t dirfd;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &dirfd) != napi_ok) { napi_throw_type_error(env, NULL, "openTreeClone(dirFd)"); return NULL; }
  int tree = (int)syscall(SYS_open_tree, dirfd, "", OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | O_CLOEXEC);
  if (tree < 0) return fail(env, "open_tree", errno);
  // open_tree gives an O_PATH descriptor; the daemon needs a real one (fsync, syncfs, fchmod).
  // The clone lives as long as a descriptor on it does.
  int fd = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = errno;
  close(tree);
  if (fd < 0) return fail(env, "openat (the clone's root)", err);
  napi_value out;
  napi_create_int32(env, fd, &out);
  return out;
}

// underneathIgnoreMount(handle, treeFd): no permission event for opens through that mount.
static napi_value js_ignore_mount (napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 2) { napi_throw_type_error(env, NULL, "underneathIgnoreMount(handle, treeFd)"); return NULL; }
  Under *u = unwrap(env, argv[0]);
  if (!u) return NULL;
  int32_t fd;
  if (napi_get_value_int32(env, argv[1], &fd) != napi_ok) { napi_throw_type_error(env, NULL, "treeFd must be a number"); return NULL; }
  if (fanotify_mark(u->perm_fd, FAN_MARK_ADD | FAN_MARK_MOUNT | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY, FAN_OPEN_PERM, fd, ".") < 0) return fail(env, "fanotify_mark (ignore the daemon's mount)", errno);
  napi_value undef;
  napi_get_undefined(env, &undef);
  return undef;
}

static bool set (napi_env env, napi_value obj, const char *key, napi_value v) {
  return napi_set_named_property(env, obj, key, v) == napi_ok;
}

// underneathDrain(handle): the events queued since the last drain, as objects
// { kind: 'open'|'change'|'overflow'|'timeout'|'rename', mask, pid, id, path?, dir?, name?,
// dir2?, name2? } (a rename: dir/name the old place, dir2/name2 the new).
static napi_value js_drain (napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 1) { napi_throw_type_error(env, NULL, "underneathDrain(handle)"); return NULL; }
  Under *u = unwrap(env, argv[0]);
  if (!u) return NULL;
  pthread_mutex_lock(&u->mu);
  Event *q = u->queue;
  size_t n = u->nqueue;
  u->queue = NULL;
  u->nqueue = u->capqueue = 0;
  u->signalled = false;
  pthread_mutex_unlock(&u->mu);
  static const char *KINDS[] = { "", "open", "change", "overflow", "timeout", "rename" };
  napi_value arr;
  napi_create_array_with_length(env, n, &arr);
  for (size_t i = 0; i < n; i++) {
    napi_value o, v;
    napi_create_object(env, &o);
    napi_create_string_utf8(env, KINDS[q[i].kind], NAPI_AUTO_LENGTH, &v); set(env, o, "kind", v);
    napi_create_double(env, (double)q[i].mask, &v); set(env, o, "mask", v);
    napi_create_int32(env, q[i].pid, &v); set(env, o, "pid", v);
    napi_create_uint32(env, q[i].id, &v); set(env, o, "id", v);
    if (q[i].where) { napi_create_string_utf8(env, q[i].where, NAPI_AUTO_LENGTH, &v); set(env, o, q[i].kind == EV_OPEN ? "path" : "dir", v); }
    if (q[i].name) { napi_create_string_utf8(env, q[i].name, NAPI_AUTO_LENGTH, &v); set(env, o, "name", v); }
    if (q[i].where2) { napi_create_string_utf8(env, q[i].where2, NAPI_AUTO_LENGTH, &v); set(env, o, "dir2", v); }
    if (q[i].name2) { napi_create_string_utf8(env, q[i].name2, NAPI_AUTO_LENGTH, &v); set(env, o, "name2", v); }
    napi_set_element(env, arr, (uint32_t)i, o);
    free(q[i].where);
    free(q[i].name);
    free(q[i].where2);
    free(q[i].name2);
  }
  free(q);
  return arr;
}

// underneathAllow(handle, id): lets a held open go on (false when it had timed out already).
static napi_value js_allow (napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 2) { napi_throw_type_error(env, NULL, "underneathAllow(handle, id)"); return NULL; }
  Under *u = unwrap(env, argv[0]);
  if (!u) return NULL;
  uint32_t id;
  if (napi_get_value_uint32(env, argv[1], &id) != napi_ok) { napi_throw_type_error(env, NULL, "id must be a number"); return NULL; }
  bool found = false;
  pthread_mutex_lock(&u->mu);
  for (size_t i = 0; i < u->nheld; i++) {
    if (u->held[i].id != id) continue;
    respond(u->perm_fd, u->held[i].fd, FAN_ALLOW);
    u->held[i] = u->held[--u->nheld];
    found = true;
    break;
  }
  pthread_mutex_unlock(&u->mu);
  napi_value out;
  napi_get_boolean(env, found, &out);
  return out;
}

// underneathStop(handle): ends the thread, allows every held open, closes the groups.
static napi_value js_stop (napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 1) { napi_throw_type_error(env, NULL, "underneathStop(handle)"); return NULL; }
  Under *u = unwrap(env, argv[0]);
  if (!u) return NULL;
  stop(u);
  if (u->tsfn) {
    napi_release_threadsafe_function(u->tsfn, napi_tsfn_abort);
    u->tsfn = NULL;
  }
  napi_value undef;
  napi_get_undefined(env, &undef);
  return undef;
}

bool underneath_register (napi_env env, napi_value exports) {
#define F(js, c) { js, NULL, c, NULL, NULL, NULL, napi_enumerable, NULL }
  static const napi_property_descriptor fns[] = {
    F("underneathStart", js_start), F("underneathMark", js_mark), F("underneathDrain", js_drain),
    F("underneathAllow", js_allow), F("underneathStop", js_stop),
    F("openTreeClone", js_open_tree_clone), F("underneathIgnoreMount", js_ignore_mount),
  };
#undef F
  return napi_define_properties(env, exports, sizeof fns / sizeof fns[0], fns) == napi_ok;
}
