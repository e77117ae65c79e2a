// The version is written once, in the root CMakeLists.txt (project(kscope VERSION x.y.z)),
// from which the CMake package, kscope.pc and the tool's --version derive; the headers
// carry it as KSCOPE_VERSION_* for code that has no build system's help. This test keeps
// the two equal: bumping one without the other fails here.
#include <kscope/core/config.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <regex>
#include <string>

namespace version_test {  // one per file: the unit tests build as one program

namespace {

std::string read_source_file(const std::string& relative) {
  const std::string path = std::string(KSCOPE_SOURCE_DIR) + "/" + relative;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(f != nullptr, path);
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

}  // namespace

TEST_CASE("KSCOPE_VERSION_* in the headers equal the project version in CMakeLists.txt") {
  const std::string cmake = read_source_file("CMakeLists.txt");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(cmake, m, std::regex(R"(project\(kscope\s+VERSION\s+(\d+)\.(\d+)\.(\d+)[\s)])")),
                  "no 'project(kscope VERSION x.y.z' in CMakeLists.txt");
  const std::string project_version = m[1].str() + "." + m[2].str() + "." + m[3].str();
  CHECK(std::string(KSCOPE_VERSION_STRING) == project_version);
  CHECK(KSCOPE_VERSION_MAJOR == std::stoi(m[1].str()));
  CHECK(KSCOPE_VERSION_MINOR == std::stoi(m[2].str()));
  CHECK(KSCOPE_VERSION_PATCH == std::stoi(m[3].str()));
}

}  // namespace version_test
