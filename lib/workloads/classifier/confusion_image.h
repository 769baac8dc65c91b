// The confusion matrix of a classifier's evaluation as a PNG: one cell per (true class, predicted
// class), its count and its share of the true class's images, shaded by that share (white 0 to
// dark blue 1), the diagonal framed, class names on both axes and a title line. Drawn with
// OpenCV (built only with it, like lib/data/image_*), written atomically (AtomicFile).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pdnn {

// counts: classes x classes, row = true class, column = predicted class (EvalResult::confusion).
// Throws pdnn::Error naming the file when it cannot be written.
void write_confusion_png(const std::string& path, const std::vector<int64_t>& counts,
                         const std::vector<std::string>& classes, const std::string& title);

// The same matrix as text: a header of column numbers, then one row per true class with its
// number, name, counts and accuracy (" 0  airplanes   398    0    1 ...   99.5%").
std::string confusion_text(const std::vector<int64_t>& counts,
                           const std::vector<std::string>& classes);

}  // namespace pdnn
