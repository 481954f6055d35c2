#include "tuner/measure/protocol.h"

#include <algorithm>
#include <cmath>


namespace qt::tune {

bool clearly_slower(const Stats& c, const Stats& inc) { return c.n > 0 && inc.n > 0 && c.ci_low > inc.ci_high; }

Measurement measure(const std::function<double()>& run_once, const std::function<void()>& flush,
                    const MeasureOptions& opt, const Stats* incumbent) {
  for (int i = 0; i < opt.warmup; ++i) run_once();
  std::vector<double> samples;
  double total = 0;
  Measurement m;
  int batch = std::max(1, opt.batch);
  while (int(samples.size()) < opt.max_reps) {
    for (int b = 0; b < batch && int(samples.size()) < opt.max_reps; ++b) {
      if (flush) flush();
      double t = run_once();
      samples.push_back(t);
      total += t;
    }
    bool enough = int(samples.size()) >= opt.min_reps && total >= opt.min_seconds;
    if (enough || total >= opt.max_seconds) break;
    if (opt.racing && incumbent && incumbent->n > 0 && clearly_slower(summarize(samples), *incumbent)) {
      m.raced_out = true;
      break;
    }
  }
  m.stats = summarize(samples);
  if (!m.raced_out && opt.racing && incumbent && incumbent->n > 0 && int(samples.size()) < opt.min_reps)
    m.raced_out = clearly_slower(m.stats, *incumbent);
  return m;
}

}  // namespace qt::tune
