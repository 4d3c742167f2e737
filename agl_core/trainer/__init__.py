"""The `Trainer` and the component-spec resolution it uses (`build_component`)."""

from agl_core.trainer.init_utils import (
    build_component,
    instantiate_component,
    instantiate_from_spec,
    load_class,
)
from agl_core.trainer.trainer import Trainer

__all__ = ["Trainer", "build_component", "instantiate_component", "instantiate_from_spec", "load_class"]
