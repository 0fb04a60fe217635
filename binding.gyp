# cpfs's own addon (src/native/cpfs.c); built by scripts/build-native.mjs.
{
  "targets": [
    {
      "target_name": "cpfs_native",
      "sources": [ "src/native/cpfs.c", "src/native/underneath.c" ],
      "defines": [ "_GNU_SOURCE" ],
      "cflags": [ "-O2", "-Wall", "-Wextra", "-Werror" ],
      # Node's common.gypi appends -O3 after "cflags"; "cflags_c" comes last, so -O2 holds.
      "cflags_c": [ "-std=gnu11", "-O2" ]
    }
  ]
}
