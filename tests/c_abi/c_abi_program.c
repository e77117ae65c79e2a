/* A C program over libkscope_c: proves the header is C (C11, no C++ in sight) and that a C
 * caller needs nothing but the library. Exits 0 when every step answered as documented. */
#include "kscope/c/kscope_c.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "c_abi_program: %s (last error: %s)\n", what, kscope_last_error());
    ++failures;
  }
}

int main(void) {
  uint32_t step = 0, decode = 0;
  expect(kscope_c_abi_version() == KSCOPE_C_ABI_VERSION, "ABI version");
  expect(kscope_site_register("step", 4, &step) == KSCOPE_OK, "register step");
  expect(kscope_site_register("decode", 6, &decode) == KSCOPE_OK, "register decode");
  for (int i = 0; i < 3; ++i) {
    kscope_scope_handle s = kscope_scope_open(step);
    kscope_scope_handle d = kscope_scope_open(decode);
    expect(s > 0 && d > 0, "open");
    expect(kscope_scope_close(d) == KSCOPE_OK, "close decode");
    expect(kscope_scope_close(s) == KSCOPE_OK, "close step");
  }
  {
    /* A caller that holds a lock of its own (Python's GIL) tries first, and makes the plain
       call, its lock let go, when the try call says it would block. */
    kscope_scope_handle t = kscope_scope_try_open(step);
    kscope_status closed;
    if (t == KSCOPE_SCOPE_WOULD_BLOCK) t = kscope_scope_open(step);
    expect(t > 0, "try open");
    closed = kscope_scope_try_close(t);
    if (closed == KSCOPE_WOULD_BLOCK) closed = kscope_scope_close(t);
    expect(closed == KSCOPE_OK, "try close");
  }
  kscope_report* report = NULL;
  expect(kscope_report_create(&report) == KSCOPE_OK, "report");
  char* text = NULL;
  size_t size = 0;
  expect(kscope_report_format(report, KSCOPE_FORMAT_TEXT, &text, &size) == KSCOPE_OK, "format");
  expect(text != NULL && strstr(text, "decode") != NULL && strlen(text) == size, "the text names decode");
  if (text) fwrite(text, 1, size, stdout);
  kscope_free(text);
  kscope_report_destroy(report);
  expect(kscope_scope_close(12345) == KSCOPE_ERROR_NOT_FOUND, "a bad handle is a status");
  return failures == 0 ? 0 : 1;
}
