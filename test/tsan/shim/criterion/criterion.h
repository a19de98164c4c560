/* TSan builds only: test/CMakeLists.txt puts test/tsan/shim first on the
 * tests' include path, so <criterion/criterion.h> is the runner shim
 * (test/tsan/crit_shim.h says why: Snaipe/Criterion#274). */
#include "../../crit_shim.h"
