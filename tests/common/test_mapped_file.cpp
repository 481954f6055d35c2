// Page release on a file mapping: the process gives the pages back, and reading them again gives the file's
// bytes; memory that is not a mapped file is never touched by it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/mapped_file.h"

namespace {

std::string temp_file(const std::vector<uint8_t>& bytes) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("qtune-mapped-" + std::to_string(::getpid()) + ".bin")).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

}  // namespace

TEST_CASE("released pages of a mapped file read the file's bytes again, and other memory is left alone", "[common]") {
  std::vector<uint8_t> bytes(5 * 4096 + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 131 + 7);
  const std::string path = temp_file(bytes);
  {
    qt::MappedFile map(path);
    REQUIRE(map.size() == bytes.size());
    CHECK(qt::release_mapped_pages(map.data() + 100, 3 * 4096));
    CHECK(qt::release_mapped_pages(map.data(), map.size()));
    CHECK(std::equal(bytes.begin(), bytes.end(), map.data()));
    // A range running past the mapping's end is not the mapping's to release.
    CHECK_FALSE(qt::release_mapped_pages(map.data() + 4096, map.size()));
  }
  std::vector<uint8_t> heap(bytes);
  CHECK_FALSE(qt::release_mapped_pages(heap.data(), heap.size()));
  CHECK(heap == bytes);
  std::filesystem::remove(path);
}
