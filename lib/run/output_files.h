// Output files of a run, checked before the run does any work, so a run that could not save
// its results fails in its first second and writes nothing: every output must be a regular
// file or not exist yet, in a folder that exists and is writable or can be created, no two
// outputs may be the same file (by name, link or inode), and no output may be one of the
// run's input files.
#pragma once
#include <string>
#include <vector>

namespace pdnn {

struct OutputFile {
  std::string flag;  // the flag that named it ("--out"), for messages
  std::string path;
};

// Throws pdnn::Error naming the flag, the path and the problem. Creates nothing.
void check_output_files(const std::vector<OutputFile>& outputs,
                        const std::vector<std::string>& inputs);

// Creates the missing folders above path (just before its first write, so a run that fails
// earlier leaves none behind); throws pdnn::Error naming the folder when it cannot.
void create_parent_folders(const std::string& path);

}  // namespace pdnn
