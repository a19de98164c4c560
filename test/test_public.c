/* test/test_public.c — the public calls that let code above the library
 * (train/, tools/, a user's program built against the installed header)
 * do what it used to do through internal headers: report through the
 * error channel. */
#include "helpers.h"

#include <string.h>

Test(public_error, set_returns_the_status_and_sets_the_detail) {
  cr_assert_eq(rp_error_set(RP_ERANGE, "batch %u of %u", 9u, 4u), RP_ERANGE);
  cr_assert_str_eq(rp_error_detail(), "batch 9 of 4");
  cr_assert_eq(rp_error_set(RP_OK, "%s", "ok too"), RP_OK);
  cr_assert_str_eq(rp_error_detail(), "ok too");
}

Test(public_error, the_old_detail_may_be_an_argument) {
  rp_error_set(RP_EINVAL, "bad size");
  rp_error_set(RP_EINVAL, "step %d: %s", 3, rp_error_detail());
  cr_assert_str_eq(rp_error_detail(), "step 3: bad size");
}

Test(public_error, null_format_clears_and_long_text_is_cut) {
  char big[2048];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  rp_error_set(RP_EIO, "%s", big);
  cr_assert_eq(strlen(rp_error_detail()), 511);
  cr_assert_eq(rp_error_set(RP_EIO, NULL), RP_EIO);
  cr_assert_str_eq(rp_error_detail(), "");
}

Test(public_error, the_library_reports_through_the_same_channel) {
  rp_error_set(RP_EINVAL, "mine");
  cr_assert_eq(rp_runtime_create(NULL, NULL), RP_EINVAL);
  cr_assert(strcmp(rp_error_detail(), "mine") != 0,
            "the library's own failure replaced the detail");
}
