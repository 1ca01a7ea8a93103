#pragma once
// Schedules tests build by hand.
#include "generators/Schedule.h"

namespace fusor::test {

/** \p s with every stage computed at the root, untiled, scalar and serial (its prepacking kept):
 * legal at every size, and slow. */
inline ClusterSchedule all_at_root(ClusterSchedule s) {
    for (StageSchedule &st : s.stages) {
        StageSchedule root;
        root.stage = st.stage;
        root.level = ComputeLevel::Root;
        root.prepack = st.prepack;
        st = root;
    }
    return s;
}

}  // namespace fusor::test
