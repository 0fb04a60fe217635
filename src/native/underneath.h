// The fanotify watch of the real directory under a mount (underneath.c), registered by cpfs.c.
#ifndef CPFS_UNDERNEATH_H
#define CPFS_UNDERNEATH_H
#include <node_api.h>
#include <stdbool.h>

bool underneath_register (napi_env env, napi_value exports);

#endif
