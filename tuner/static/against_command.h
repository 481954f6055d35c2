#pragma once
// `qtune static --against STORE`: the static model's prediction of every verified row a GPU measured into a
// tuning store, side by side, with its rank correlation and errors per family (calibration.h).
#include "common/cli_args.h"

namespace qt::tune {

void declare_against_flag(CliArgs& cli);
int run_against(const CliArgs& cli);

}  // namespace qt::tune
