# export_models.py — makes tests/onnx/fixtures/models/: small random-weight versions of the
# models users bring as ONNX files, exported by torch.onnx.export (opset 17, the TorchScript
# exporter, which is what most ONNX files in the wild come from), each with one input and
# PyTorch's output for it. tests/onnx/models.sh holds `coil run` of each file against them.
#
#   bench/.venv/bin/python tests/onnx/export_models.py OUT_DIR [NAME ...]
#
# Needs torch, torchvision and transformers (bench/.venv: `pip install torchvision
# transformers`). The configurations are the real architectures with fewer and narrower
# layers, so each file is a few hundred KiB: torchvision's ResNet-18 and MobileNetV2 blocks,
# Hugging Face's BERT, GPT-2 and ViT classes. Weights are random (seeded); batch norms get
# random running statistics so that folding them is tested, not skipped.
import os
import sys

import numpy as np
import torch


def small_resnet18():
    """torchvision's ResNet with ResNet-18's BasicBlocks [2, 2, 2, 2], widths 8..64."""
    from torchvision.models.resnet import BasicBlock, ResNet

    class SmallResNet(ResNet):
        def __init__(self):
            super().__init__(BasicBlock, [2, 2, 2, 2], num_classes=10)
            # ResNet fixes widths 64..512: rebuild the stem and stages eight times narrower
            self.inplanes = 8
            self.conv1 = torch.nn.Conv2d(3, 8, 7, 2, 3, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(8)
            self.layer1 = self._make_layer(BasicBlock, 8, 2)
            self.layer2 = self._make_layer(BasicBlock, 16, 2, stride=2)
            self.layer3 = self._make_layer(BasicBlock, 32, 2, stride=2)
            self.layer4 = self._make_layer(BasicBlock, 64, 2, stride=2)
            self.fc = torch.nn.Linear(64, 10)

    return SmallResNet(), torch.randn(2, 3, 64, 64)


def small_mobilenet_v2():
    from torchvision.models import mobilenet_v2

    return mobilenet_v2(width_mult=0.25, num_classes=10), torch.randn(1, 3, 64, 64)


class FirstOutput(torch.nn.Module):
    """A Hugging Face model called with its first argument by name, giving its first output
    (last_hidden_state): what tracing sees is the model's forward, not its keyword handling."""

    def __init__(self, model, arg, with_mask=False):
        super().__init__()
        self.model, self.arg, self.with_mask = model, arg, with_mask

    def forward(self, x):
        # GPT-2 without a mask looks for packed sequences with torch.diff, which the
        # exporter lacks: an all-ones mask (what a tokenizer gives) takes the plain path
        mask = {"attention_mask": torch.ones_like(x)} if self.with_mask else {}
        return self.model(**{self.arg: x}, **mask, return_dict=False)[0]


def small_bert():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(attn_implementation="eager", vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64)
    return FirstOutput(BertModel(cfg, add_pooling_layer=False), "input_ids"), torch.randint(0, 512, (2, 16))


def small_gpt2():
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(attn_implementation="eager", vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                     use_cache=False)
    return FirstOutput(GPT2Model(cfg), "input_ids", with_mask=True), torch.randint(0, 512, (2, 16))


def small_vit():
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(attn_implementation="eager", image_size=32, patch_size=8, num_channels=3, hidden_size=64,
                    num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    return FirstOutput(ViTModel(cfg, add_pooling_layer=False), "pixel_values"), torch.randn(2, 3, 32, 32)


MODELS = {"resnet18": small_resnet18, "mobilenet_v2": small_mobilenet_v2,
          "bert": small_bert, "gpt2": small_gpt2, "vit": small_vit}


def randomise_batch_norms(model):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)


def export(name, out):
    torch.manual_seed(0)
    model, x = MODELS[name]()
    randomise_batch_norms(model)
    model.eval()
    with torch.no_grad():
        y = model(x)
    y = y[0] if isinstance(y, (tuple, list)) else y
    path = os.path.join(out, f"{name}.onnx")
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    np.save(os.path.join(out, f"{name}_x.npy"), x.numpy())
    np.save(os.path.join(out, f"{name}_y.npy"), y.numpy())
    print(f"{name}: {os.path.getsize(path) // 1024} KiB, x {tuple(x.shape)}, y {tuple(y.shape)}")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        export(name, out)


if __name__ == "__main__":
    main()
