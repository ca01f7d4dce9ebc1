"""Models nobody on the team wrote, built the way their users build them: transformers
architectures from tiny configs, called with keyword arguments and their own ``labels=`` loss,
and CNN families in the shape of torchvision's (BatchNorm, ``ReLU(inplace=True)``, depthwise
convolutions, squeeze-and-excitation, residual adds). Each builder returns a
``gradexplorer.session.Workload`` whose batches are fixed by the step number, and names one attention
(or block) module to hook and one module to break.

Everything is built from code, nothing downloaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

import gradexplorer as gx

VOCAB, SEQ, BATCH = 64, 8, 2


@dataclass(frozen=True)
class ZooModel:
    """One architecture: how to build it, the attention module a hook goes on (None for a CNN
    without one) and a module mid-network whose output a test may make non-finite."""

    name: str
    build: Callable[[], gx.session.Workload]
    attention: str | None
    middle: str


def _ids(step: int, n: int = SEQ, vocab: int = VOCAB) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(3, vocab, (BATCH, n), generator=g)


def _pixels(step: int, size: int = 16, channels: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(2000 + step)
    return torch.randn(BATCH, channels, size, size, generator=g)


def _workload(model: nn.Module, make_batch, name: str, loss_fn=None) -> gx.session.Workload:
    return gx.session.Workload(model=model, make_batch=make_batch, loss_fn=loss_fn, name=name)


def _lm(model_cls, config) -> gx.session.Workload:
    """A causal or masked language model called as its docs do: ``model(input_ids=, labels=)``."""
    torch.manual_seed(0)
    return _workload(model_cls(config), lambda step: {"input_ids": _ids(step), "labels": _ids(step)},
                     model_cls.__name__)


def _seq2seq(model_cls, config) -> gx.session.Workload:
    torch.manual_seed(0)
    return _workload(model_cls(config),
                     lambda step: {"input_ids": _ids(step), "labels": _ids(step + 500, 6)},
                     model_cls.__name__)


def _decoder(model_cls, config_cls, **extra) -> gx.session.Workload:
    """A Llama-shaped decoder (grouped-query attention, rotary positions) from a tiny config."""
    return _lm(model_cls, config_cls(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, **extra))


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return _lm(GPT2LMHeadModel, GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=32,
        bos_token_id=0, eos_token_id=0))


def bert():
    from transformers import BertConfig, BertForMaskedLM
    return _lm(BertForMaskedLM, BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32))


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return _decoder(LlamaForCausalLM, LlamaConfig)


def mistral():
    from transformers import MistralConfig, MistralForCausalLM
    return _decoder(MistralForCausalLM, MistralConfig)


def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM
    return _decoder(MixtralForCausalLM, MixtralConfig, num_local_experts=4, num_experts_per_tok=2)


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return _decoder(Qwen2ForCausalLM, Qwen2Config)


def gemma():
    from transformers import GemmaConfig, GemmaForCausalLM
    return _decoder(GemmaForCausalLM, GemmaConfig, head_dim=8)


def t5():
    from transformers import T5Config, T5ForConditionalGeneration
    return _seq2seq(T5ForConditionalGeneration, T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0))


def bart():
    from transformers import BartConfig, BartForConditionalGeneration
    return _seq2seq(BartForConditionalGeneration, BartConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=32))


def vit():
    from transformers import ViTConfig, ViTForImageClassification
    torch.manual_seed(0)
    model = ViTForImageClassification(ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, num_labels=5))
    return _workload(model, lambda step: {"pixel_values": _pixels(step),
                                          "labels": torch.arange(BATCH) % 5}, "ViT")


def clip():
    from transformers import CLIPConfig, CLIPModel
    torch.manual_seed(0)
    model = CLIPModel(CLIPConfig(
        text_config={"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 1, "num_attention_heads": 2,
                     "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 2,
                     "pad_token_id": 1},
        vision_config={"image_size": 16, "patch_size": 4, "hidden_size": 32,
                       "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2},
        projection_dim=16))
    return _workload(model, lambda step: {"input_ids": _ids(step), "pixel_values": _pixels(step),
                                          "return_loss": True}, "CLIP")


def whisper():
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(WhisperConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=8, max_target_positions=16,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0))

    def batch(step):
        g = torch.Generator().manual_seed(3000 + step)
        return {"input_features": torch.randn(BATCH, 8, 16, generator=g),
                "labels": _ids(step, 6)}
    return _workload(model, batch, "Whisper")


# --- CNN families in torchvision's shape (torchvision itself does not import beside this
# torch build; these follow its modules: names, BN after conv, ReLU(inplace=True), `out += identity`)

class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2), BasicBlock(16, 16))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Sigmoid()

    def forward(self, x):
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2/V3 block: expand, depthwise, (SE), project, residual."""

    def __init__(self, channels: int, expand: int, se: bool) -> None:
        super().__init__()
        hidden = channels * expand
        layers = [nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
                  nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                  nn.ReLU6(inplace=True)]
        if se:
            layers.append(SqueezeExcitation(hidden, max(1, hidden // 4)))
        layers += [nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x)


class TinyMobileNet(nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                          nn.Hardswish(inplace=True)),
            InvertedResidual(8, 2, se=False), InvertedResidual(8, 3, se=True))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(8, 16), nn.Hardswish(inplace=True), nn.Dropout(0.2),
                                        nn.Linear(16, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def _cnn(model_cls, name: str) -> Callable[[], gx.session.Workload]:
    def build():
        torch.manual_seed(0)
        return _workload(model_cls(), lambda step: (_pixels(step), torch.arange(BATCH) % 5), name,
                         loss_fn=nn.functional.cross_entropy)
    return build


ZOO = [
    ZooModel("gpt2", gpt2, "transformer.h.1.attn", "transformer.h.0.mlp"),
    ZooModel("bert", bert, "bert.encoder.layer.1.attention.self", "bert.encoder.layer.0.output"),
    ZooModel("t5", t5, "encoder.block.1.layer.0.SelfAttention", "encoder.block.0.layer.1"),
    ZooModel("bart", bart, "model.encoder.layers.0.self_attn", "model.encoder.layers.0.fc2"),
    ZooModel("llama", llama, "model.layers.1.self_attn", "model.layers.0.mlp"),
    ZooModel("mistral", mistral, "model.layers.1.self_attn", "model.layers.0.mlp"),
    ZooModel("qwen2", qwen2, "model.layers.1.self_attn", "model.layers.0.mlp"),
    ZooModel("gemma", gemma, "model.layers.1.self_attn", "model.layers.0.mlp"),
    ZooModel("mixtral", mixtral, "model.layers.1.self_attn", "model.layers.0.self_attn.o_proj"),
    ZooModel("vit", vit, "vit.layers.1.attention", "vit.layers.0.mlp"),
    ZooModel("clip", clip, "text_model.encoder.layers.0.self_attn", "vision_model.encoder.layers.0.mlp"),
    ZooModel("whisper", whisper, "model.encoder.layers.0.self_attn", "model.encoder.layers.0.fc2"),
    ZooModel("resnet", _cnn(TinyResNet, "TinyResNet"), None, "layer1.1.conv1"),
    ZooModel("mobilenet", _cnn(TinyMobileNet, "TinyMobileNet"), None, "features.2.block.6"),
]
ZOO_BY_NAME = {m.name: m for m in ZOO}
