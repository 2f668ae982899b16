// Anchor translation unit for the precompiled <torch/torch.h> (cmake/TorchConformTorch.cmake).
