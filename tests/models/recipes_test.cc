// Every shipped recipe parses and describes a model lathe can build.
#include <gtest/gtest.h>

#include <filesystem>

#include "lathe/models/model.h"
#include "lathe/train/recipe.h"

namespace lathe {
namespace {

TEST(Recipes, EveryShippedRecipeBuildsItsModel) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(LATHE_SOURCE_DIR) + "/recipes")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    // Shrunk depth: the point is the config's keys and family, not allocating 124M parameters.
    const bool gpt2 = e.path().filename().string().rfind("gpt2", 0) == 0;
    const train::TrainConfig c =
        train::load_recipe(e.path().string(), {gpt2 ? "model.config.n_layer=1" : "model.config.num_hidden_layers=2"});
    ASSERT_TRUE(c.model_config.is_object());
    auto m = Model::create(c.model_config.dump(), 0);
    EXPECT_GT(m->n_params(), 0);
    EXPECT_LE(c.seq_len, m->config().max_positions);
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace lathe
