"""Images: what a task, a message or a tool result may carry besides text.

An `Image` is a media type and either a URL or bytes. Facts hold an image of bytes by its
digest (`sha256:...`) and media type only: the store keeps the bytes once per digest beside
the log (`eventstore.blobs`), written with the first fact that refers to them, and the hash
chain covers them through the digest. Before each LLM call the engine finds the bytes of the
images the request holds (in the run's own recorder, else in the store), so that callers,
replay and branch need no file and no network.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from eventstore.blobs import Blob, blob_digest

__all__ = ["Image", "ImageLike", "as_images", "blobs_of", "carry_data", "image_data"]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _sniffed(data: bytes) -> str | None:
    """The media type the bytes begin with (PNG, JPEG, GIF, WebP), or None."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class Image(BaseModel):
    """An image: its `media_type` (e.g. "image/png") and either its `url` or the `digest` of
    its bytes. Make one with `Image.from_file`, `Image.from_bytes` or `Image.from_url` (or let
    `images=[...]` do it). `data` holds the bytes where this process has them (a new image, or
    one the engine found for an LLM call); a recorded image has only its digest."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    unredacted: ClassVar[frozenset[str]] = frozenset({"media_type", "digest"})
    """Fields redaction leaves as they are: they name the bytes, they hold no text."""

    media_type: str
    digest: str | None = None
    url: str | None = None
    _data: bytes | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_source(self) -> Image:
        if (self.digest is None) == (self.url is None):
            raise ValueError("an Image has either a digest (of its bytes) or a url, not both")
        if self.digest is not None and not _DIGEST.fullmatch(self.digest):
            raise ValueError(f"an Image digest is 'sha256:' and 64 hex digits, not {self.digest!r}")
        return self

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):  # the source it has, not the one it lacks
            for name in ("digest", "url"):
                if data.get(name, 0) is None:
                    del data[name]
        return data

    # -- making one ------------------------------------------------------------------------

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str | None = None) -> Image:
        """An image of these bytes; `media_type` is read from them (PNG, JPEG, GIF, WebP)
        when not given."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"Image.from_bytes takes bytes, not {type(data).__name__}.")
        raw = bytes(data)
        if not raw:
            raise ValueError("Image.from_bytes: the image is empty (no bytes).")
        kind = media_type or _sniffed(raw)
        if kind is None:
            raise ValueError(
                "Image.from_bytes: these bytes are not a PNG, JPEG, GIF or WebP image; give "
                "media_type=... (e.g. 'image/png')."
            )
        image = cls(media_type=kind, digest=blob_digest(raw))
        image._data = raw
        return image

    @classmethod
    def from_file(cls, path: str | Path, media_type: str | None = None) -> Image:
        """An image of a file's bytes, read now; `media_type` from the bytes, else the name."""
        file = Path(path)
        try:
            raw = file.read_bytes()
        except OSError as e:
            raise FileNotFoundError(f"Cannot read the image {str(file)!r}: {e}") from e
        guessed = media_type or _sniffed(raw) or mimetypes.guess_type(file.name)[0]
        if not guessed or not guessed.startswith("image/"):
            raise ValueError(
                f"{str(file)!r} is not a PNG, JPEG, GIF or WebP image; give media_type=...."
            )
        return cls.from_bytes(raw, guessed)

    @classmethod
    def from_url(cls, url: str, media_type: str | None = None) -> Image:
        """An image at an http(s) URL, which the provider fetches (nothing is downloaded
        here); a `data:` URL is its bytes. `media_type` from the URL's name when not given
        ("image/*" when it does not say)."""
        if url.startswith("data:"):
            return _from_data_url(url, media_type)
        scheme = urllib.parse.urlsplit(url).scheme
        if scheme not in ("http", "https", "gs", "s3"):
            raise ValueError(f"Image.from_url takes an http(s) or data: URL, not {url!r}.")
        path = urllib.parse.urlsplit(url).path
        guessed = media_type or mimetypes.guess_type(path)[0]
        return cls(media_type=guessed if guessed else "image/*", url=url)

    @classmethod
    def of(cls, value: Any) -> Image:
        """`value` as an Image: an Image as it is, bytes, a `Path` or a file path, or an
        http(s) or data: URL."""
        if isinstance(value, Image):
            return value
        if isinstance(value, bytes | bytearray | memoryview):
            return cls.from_bytes(bytes(value))
        if isinstance(value, Path):
            return cls.from_file(value)
        if isinstance(value, str):
            if re.match(r"(https?|data|gs|s3):", value):
                return cls.from_url(value)
            return cls.from_file(value)
        raise TypeError(
            f"An image is an Image, bytes, a file path or a URL, not {type(value).__name__}."
        )

    # -- its bytes -------------------------------------------------------------------------

    @property
    def data(self) -> bytes | None:
        """The bytes, where this process has them (None for a URL, and for a recorded image
        whose bytes were not looked up)."""
        return self._data

    def with_data(self, data: bytes) -> Image:
        """This image with its bytes (which must match its digest)."""
        if self.digest is None or blob_digest(data) != self.digest:
            raise ValueError(f"These bytes are not those of {self!r}.")
        made = self.model_copy()
        made._data = bytes(data)
        return made

    def blob(self) -> Blob | None:
        """The blob the store keeps of it (None for a URL, or without its bytes)."""
        if self._data is None or self.digest is None:
            return None
        return Blob(self.digest, self.media_type, self._data)

    def __eq__(self, other: object) -> bool:  # the bytes are the digest's: not compared
        if not isinstance(other, Image):
            return NotImplemented
        return (self.media_type, self.digest, self.url) == (
            other.media_type,
            other.digest,
            other.url,
        )

    def __hash__(self) -> int:
        return hash((self.media_type, self.digest, self.url))

    def __repr__(self) -> str:
        if self.url is not None:
            shown = self.url if len(self.url) <= 60 else self.url[:59] + "…"
            return f"Image({self.media_type!r}, url={shown!r})"
        size = f", {len(self._data)} bytes" if self._data is not None else ""
        return f"Image({self.media_type!r}, {str(self.digest)[:19]}…{size})"


ImageLike = Image | bytes | str | Path
"""What `AgentBuilder(task, images=...)` and `Thread.send(..., images=...)` take as an image:
an `Image`, its bytes, a file path, or an http(s) or data: URL."""


def _from_data_url(url: str, media_type: str | None) -> Image:
    head, sep, body = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise ValueError("Image.from_url: a data: URL must be base64 (data:image/png;base64,...).")
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"Image.from_url: the data: URL is not valid base64 ({e}).") from e
    given = head[len("data:") : -len(";base64")] or None
    return Image.from_bytes(raw, media_type or given)


def as_images(values: ImageLike | Iterable[ImageLike] | None) -> tuple[Image, ...]:
    """`images=[...]` as Images (see `Image.of`); a single image is taken as one."""
    if values is None:
        return ()
    if isinstance(values, Image | bytes | bytearray | str | Path):
        return (Image.of(values),)
    return tuple(Image.of(v) for v in values)


def blobs_of(images: Iterable[Image]) -> tuple[Blob, ...]:
    """The blobs of these images that hold their bytes, each digest once."""
    found: dict[str, Blob] = {}
    for image in images:
        blob = image.blob() if isinstance(image, Image) else None
        if blob is not None:
            found.setdefault(blob.digest, blob)
    return tuple(found.values())


def _walk(value: Any) -> Iterator[Image]:
    """Every Image inside a value: models, tuples, lists and dicts, at any depth."""
    if isinstance(value, Image):
        yield value
    elif isinstance(value, BaseModel):
        for item in value.__dict__.values():
            yield from _walk(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)


def image_data(value: Any) -> dict[str, bytes]:
    """The bytes of the images inside `value` that hold them, by digest."""
    return {i.digest: i._data for i in _walk(value) if i.digest and i._data is not None}


def carry_data(value: Any, data: Mapping[str, bytes]) -> None:
    """Give the images inside `value` that lack their bytes those `data` holds for their
    digest: a fact made again by redaction, the images an LLM call sends. The bytes are the
    digest's own, so an image is the same value with them or without them."""
    if data:
        for image in _walk(value):
            digest = image.digest
            if digest is not None and image._data is None and digest in data:
                image._data = data[digest]
