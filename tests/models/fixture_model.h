// Test helper: the fixture models (tests/fixtures/models/<name>) loaded in f32, to compare against f32
// references and against each other.
#pragma once

#include <memory>
#include <string>

#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe::testing {

inline std::unique_ptr<Model> load_fixture_model_f32(const std::string& name) {
  return Model::load(fixtures_root() + "/models/" + name, {.force_f32 = true});
}

}  // namespace lathe::testing
