// IDX files (the MNIST format, http://yann.lecun.com/exdb/mnist/): images (magic 0x00000803,
// uint8, N x rows x cols; or 0x00000804, uint8, N x channels x rows x cols, 1 or 3 channels:
// the DCGAN's colour samples, planes R, G, B) and labels (magic 0x00000801, uint8, N), raw or
// gzip-compressed.
// Reading validates everything a damaged download or a crafted file can get wrong (magic,
// dimensions and their product, exact length, a size beyond the machine's memory) before it
// allocates, reads no more than the header promises, refuses FIFOs and devices, and throws
// pdnn::Error naming the file and the problem; writing is for the tests and
// the synthetic data sets they build.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"  // LabeledImages: one split, images (N,1,rows,cols) = pixel/255

namespace pdnn {

// Images as stored: n x channels x rows x cols bytes, row-major. Written with magic 0x803
// (three dimensions) when channels is 1, else 0x804.
struct IdxImages {
  int64_t n = 0, rows = 0, cols = 0, channels = 1;
  std::vector<uint8_t> pixels;
};

// gzip is recognised by its magic bytes (1f 8b), whatever the name; other files are read raw.
IdxImages read_idx_images(const std::string& path);
std::vector<uint8_t> read_idx_labels(const std::string& path);
// Writes are compressed when the path ends in ".gz".
void write_idx_images(const std::string& path, const IdxImages& images);
void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels);

struct ImageDataset {
  std::string name;  // as printed and written to results ("mnist", "mnist-npm10k", ...)
  std::string dir;
  std::vector<std::string> files;  // the IDX files read
  LabeledImages train, test;
  int num_classes = 10;
};

// Converts stored bytes to the float tensor (N,channels,rows,cols) = pixel / 255.
Tensor idx_to_tensor(const IdxImages& images);

// Loads a folder in the MNIST layout: train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each raw or with ".gz" (also the
// "train-images.idx3-ubyte" spelling). Checks that the images are grey (one channel), that
// each split's image and label counts agree, that both splits have the same image size and that every label is below num_classes.
// The data set's name is the first line of the folder's NAME file when there is one (the
// fetch scripts write it, e.g. "mnist-npm10k"), else default_name.
ImageDataset load_idx_dataset(const std::string& dir, const std::string& default_name,
                              int num_classes = 10);

// The name load_idx_dataset would report for dir (NAME file or default_name).
std::string dataset_name(const std::string& dir, const std::string& default_name);

}  // namespace pdnn
