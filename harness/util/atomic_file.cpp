#include "harness/util/atomic_file.h"
#include "harness/util/posix_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace tc {

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string dir = posix_fs::dir_name(path);
  posix_fs::make_dirs(dir);
  std::string tmp = dir + "/." + posix_fs::base_name(path) + ".tmp-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  auto fail = [&](const char* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path + "' (" + what + "): " + std::strerror(err));
  };
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path + "' (close): " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path + "' (rename): " + std::strerror(err));
  }
}

}  // namespace tc
