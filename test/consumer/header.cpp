// The installed header compiled as C++ (test/consumer/run.sh): ISO C++11,
// pedantic, including the macros a caller uses.
#include <reprise.h>

int main() {
  rp_event none = RP_NO_EVENT;
  rp_access acc = {rp_inst{}, RP_READ, RP_REDOP_SUM};
  (void)acc;
  return (int)none.id + (rp_status_name(RP_OK) ? 0 : 1);
}
