// Against a build with every optional component off (check_install.sh --minimal): what a program gets
// that asks for one of them. Each refusal must be NotSupported and name the option that was off; the
// core (F16 conversion, the registry without PyTorch) keeps working. pytorch.h and hf_gguf.h are not
// installed with their components off: the check hands this program the source tree's copies, the
// declarations the in-tree CLI is built with.
//   minimal FOLDER_WITH_CONFIG_JSON FILE
#include <safeweights/convert.h>
#include <safeweights/device.h>
#include <safeweights/format.h>
#include <safeweights/hf_gguf.h>
#include <safeweights/pytorch.h>
#include <safeweights/quantize.h>

#include <cstddef>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace sw = safeweights;

int failures = 0;

void expect_refused(std::string_view what, const sw::Error& error, std::string_view option) {
  const bool ok = error.kind() == sw::ErrorKind::NotSupported && error.message().find(option) != std::string::npos;
  std::cout << what << ": " << (ok ? "refused" : "UNEXPECTED") << ": " << error.to_string() << "\n";
  if (!ok) ++failures;
}

void expect(std::string_view what, bool ok) {
  std::cout << what << ": " << (ok ? "ok" : "UNEXPECTED") << "\n";
  if (!ok) ++failures;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: minimal FOLDER_WITH_CONFIG_JSON FILE\n";
    return 2;
  }
  const std::string folder = argv[1], file = argv[2];

  auto device = sw::Device::open("cuda:0");
  if (device.is_ok()) {
    expect("Device::open(cuda:0)", false);
  } else {
    expect_refused("Device::open(cuda:0)", device.error(), "SAFEWEIGHTS_WITH_CUDA=OFF");
  }
  expect("Device::open(host)", sw::Device::open("host").is_ok());

  std::vector<float> values(32, 1.0f);
  std::vector<std::byte> q4(18), f16(64);
  const sw::Status q = sw::quantize(sw::TensorType::Q4_0, values, q4);
  if (q.is_ok()) {
    expect("quantize(Q4_0)", false);
  } else {
    expect_refused("quantize(Q4_0)", q.error(), "SAFEWEIGHTS_WITH_QUANT=OFF");
  }
  expect("quantize(F16)", sw::quantize(sw::TensorType::F16, values, f16).is_ok());

  auto checkpoint = sw::pytorch::open_checkpoint(file);
  if (checkpoint.is_ok()) {
    expect("pytorch::open_checkpoint", false);
  } else {
    expect_refused("pytorch::open_checkpoint", checkpoint.error(), "SAFEWEIGHTS_WITH_PYTORCH=OFF");
  }
  auto converted = sw::convert_bin_folder(folder, folder + "/out");
  if (converted.is_ok()) {
    expect("convert_bin_folder", false);
  } else {
    expect_refused("convert_bin_folder", converted.error(), "SAFEWEIGHTS_WITH_PYTORCH=OFF");
  }
  bool listed = false;
  for (const sw::Format* format : sw::formats()) listed = listed || format->name() == "pytorch";
  expect("no pytorch format in the registry", !listed);

  expect("hf::is_model_folder (any folder with a config.json)", sw::hf::is_model_folder(folder));
  // convert_path asks the HF plan provider for such a folder written as GGUF.
  auto report = sw::convert_path(folder, folder + "/out.gguf", {});
  if (report.is_ok()) {
    expect("convert_path(HF folder -> .gguf)", false);
  } else {
    expect_refused("convert_path(HF folder -> .gguf)", report.error(), "SAFEWEIGHTS_WITH_HF=OFF");
  }
  return failures == 0 ? 0 : 1;
}
