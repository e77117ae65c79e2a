// Tests for kscope/report/rank.hpp: rank detection order from the environment, malformed values,
// the API override, and per-rank file names.
#include <kscope/report/rank.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace rank_test {  // one per file: the unit tests build as one program

namespace {

// Clears every rank variable for the test, restores them afterwards.
class clean_rank_environment {
 public:
  clean_rank_environment() {
    for (const char* name : kscope::rank_environment_variables) {
      const char* v = std::getenv(name);
      saved_[index_] = v ? std::optional<std::string>(v) : std::nullopt;
      ++index_;
      unsetenv(name);
    }
    kscope::clear_rank();
  }
  ~clean_rank_environment() {
    std::size_t i = 0;
    for (const char* name : kscope::rank_environment_variables) {
      if (saved_[i]) setenv(name, saved_[i]->c_str(), 1); else unsetenv(name);
      ++i;
    }
    kscope::clear_rank();
  }
  clean_rank_environment(const clean_rank_environment&) = delete;
  clean_rank_environment& operator=(const clean_rank_environment&) = delete;

 private:
  std::optional<std::string> saved_[5];
  std::size_t index_ = 0;
};

}  // namespace

TEST_CASE("detect_rank: nothing set -> empty; order RANK, LOCAL_RANK, OMPI, PMI, SLURM") {
  clean_rank_environment env;
  CHECK_FALSE(kscope::detect_rank().has_value());
  CHECK_FALSE(kscope::current_rank().has_value());
  setenv("SLURM_PROCID", "5", 1);
  CHECK(kscope::detect_rank() == 5);
  setenv("PMI_RANK", "4", 1);
  CHECK(kscope::detect_rank() == 4);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  CHECK(kscope::detect_rank() == 3);
  setenv("LOCAL_RANK", "2", 1);
  CHECK(kscope::detect_rank() == 2);
  setenv("RANK", "1", 1);
  CHECK(kscope::detect_rank() == 1);
  setenv("RANK", "0", 1);
  CHECK(kscope::detect_rank() == 0);
}

TEST_CASE("detect_rank: malformed values are skipped, the next variable counts") {
  clean_rank_environment env;
  const char* bad[] = {"", " ", "-1", "+2", "3x", "x3", "1e3", "1.0", "99999999999", "2147483648"};
  setenv("LOCAL_RANK", "7", 1);
  for (const char* value : bad) {
    CAPTURE(value);
    setenv("RANK", value, 1);
    CHECK(kscope::detect_rank() == 7);
  }
  unsetenv("LOCAL_RANK");
  setenv("RANK", "abc", 1);
  CHECK_FALSE(kscope::detect_rank().has_value());
  setenv("RANK", " 12 ", 1);  // surrounding blanks are tolerated
  CHECK(kscope::detect_rank() == 12);
  setenv("RANK", "2147483647", 1);
  CHECK(kscope::detect_rank() == 2147483647);
  CHECK(kscope::detail::parse_rank(nullptr) == std::nullopt);
}

TEST_CASE("set_rank overrides the environment; a negative value clears it") {
  clean_rank_environment env;
  setenv("RANK", "1", 1);
  kscope::set_rank(6);
  CHECK(kscope::current_rank() == 6);
  CHECK(kscope::detect_rank() == 1);  // detect_rank reads the environment only
  kscope::set_rank(-3);
  CHECK(kscope::current_rank() == 1);
  kscope::set_rank(2);
  kscope::clear_rank();
  CHECK(kscope::current_rank() == 1);
}

TEST_CASE("rank_file_name: before the extension of the last component; unchanged without a rank") {
  using kscope::rank_file_name;
  CHECK(rank_file_name("run.json", 3) == "run.rank3.json");
  CHECK(rank_file_name("out/run.json", 0) == "out/run.rank0.json");
  CHECK(rank_file_name("run", 3) == "run.rank3");
  CHECK(rank_file_name("dir.d/run", 3) == "dir.d/run.rank3");
  CHECK(rank_file_name("a.b.json", 12) == "a.b.rank12.json");
  CHECK(rank_file_name(".hidden", 1) == ".hidden.rank1");
  CHECK(rank_file_name("dir/.hidden", 1) == "dir/.hidden.rank1");
  CHECK(rank_file_name("", 1) == ".rank1");
  CHECK(rank_file_name("run.json", std::nullopt) == "run.json");
  CHECK(rank_file_name("run.json", -1) == "run.json");

  clean_rank_environment env;
  CHECK(rank_file_name("run.json") == "run.json");
  setenv("OMPI_COMM_WORLD_RANK", "9", 1);
  CHECK(rank_file_name("run.json") == "run.rank9.json");
  kscope::set_rank(4);
  CHECK(rank_file_name("run.json") == "run.rank4.json");
}

namespace {
struct fake_report {
  std::string* written;
  bool write_json(const std::string& path) const {
    *written = path;
    return path.find("fail") == std::string::npos;
  }
};
}  // namespace

TEST_CASE("write_json_for_rank writes to the rank's file name and says which") {
  clean_rank_environment env;
  std::string path;
  kscope::set_rank(2);
  CHECK(kscope::write_json_for_rank(fake_report{&path}, "run.json") == "run.rank2.json");
  CHECK(path == "run.rank2.json");
  CHECK(kscope::write_json_for_rank(fake_report{&path}, "fail.json").empty());
}

}  // namespace rank_test
