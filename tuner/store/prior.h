#pragma once
// Transfer from the store: the results of the same kernel family (same source, same dtypes) measured on
// *other* devices become what is known before a search on this one. Rows at the requested shape are used;
// without any, those of the nearest shape measured elsewhere (the nearest-shape rule's distance).
#include <string>
#include <vector>

#include "tuner/core/knowledge.h"
#include "tuner/store/store.h"

namespace qt::tune {

// Empty knowledge (no prior) when no other device has results for the family.
Knowledge prior_from_store(const Store& store, const Space& space, const DeviceFingerprint& self,
                           const std::string& family, const std::string& source_hash, const std::string& dtypes,
                           const std::vector<int64_t>& shape);

}  // namespace qt::tune
