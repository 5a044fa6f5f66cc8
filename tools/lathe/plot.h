// Training curves as SVG (any browser or image viewer shows them; no plotting library needed): train
// loss with validation points, and the learning rate, read from <run>/metrics.jsonl.
#pragma once

#include <string>

namespace lathe::cli {

// Writes the picture to svg_path; returns the number of train steps plotted.
int write_training_plot(const std::string& run_dir, const std::string& svg_path);

}  // namespace lathe::cli
