// The team observer of core/parallel.h.
#include "core/parallel.h"

namespace pdnn {

namespace detail {
std::atomic<TeamObserver> team_observer{nullptr};
}

void set_team_observer(TeamObserver f) {
  detail::team_observer.store(f, std::memory_order_relaxed);
}

}  // namespace pdnn
