from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BindDeviceRequest(_message.Message):
    __slots__ = ("device_id", "public_key")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    public_key: bytes
    def __init__(self, device_id: _Optional[str] = ..., public_key: _Optional[bytes] = ...) -> None: ...

class BindDeviceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RevokeDeviceRequest(_message.Message):
    __slots__ = ("device_id", "issued_at", "signature")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    issued_at: int
    signature: bytes
    def __init__(self, device_id: _Optional[str] = ..., issued_at: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class RevokeDeviceResponse(_message.Message):
    __slots__ = ("token_name",)
    TOKEN_NAME_FIELD_NUMBER: _ClassVar[int]
    token_name: str
    def __init__(self, token_name: _Optional[str] = ...) -> None: ...

class PutObjectRequest(_message.Message):
    __slots__ = ("vault_id", "name", "data")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    name: str
    data: bytes
    def __init__(self, vault_id: _Optional[str] = ..., name: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class PutObjectResponse(_message.Message):
    __slots__ = ("written",)
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    written: bool
    def __init__(self, written: _Optional[bool] = ...) -> None: ...

class GetObjectRequest(_message.Message):
    __slots__ = ("vault_id", "name")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    name: str
    def __init__(self, vault_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GetObjectResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ListObjectsRequest(_message.Message):
    __slots__ = ("vault_id", "prefix", "start_after")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    START_AFTER_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    prefix: str
    start_after: str
    def __init__(self, vault_id: _Optional[str] = ..., prefix: _Optional[str] = ..., start_after: _Optional[str] = ...) -> None: ...

class ListObjectsResponse(_message.Message):
    __slots__ = ("names", "truncated")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    truncated: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class DeleteObjectRequest(_message.Message):
    __slots__ = ("vault_id", "name")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    name: str
    def __init__(self, vault_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteObjectResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AppendVersionRequest(_message.Message):
    __slots__ = ("vault_id", "number", "parent", "data")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    number: int
    parent: bytes
    data: bytes
    def __init__(self, vault_id: _Optional[str] = ..., number: _Optional[int] = ..., parent: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...

class AppendVersionResponse(_message.Message):
    __slots__ = ("appended", "head")
    APPENDED_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    appended: bool
    head: int
    def __init__(self, appended: _Optional[bool] = ..., head: _Optional[int] = ...) -> None: ...

class ListVersionsRequest(_message.Message):
    __slots__ = ("vault_id", "after", "limit")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    after: int
    limit: int
    def __init__(self, vault_id: _Optional[str] = ..., after: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class Version(_message.Message):
    __slots__ = ("number", "data")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    number: int
    data: bytes
    def __init__(self, number: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class ListVersionsResponse(_message.Message):
    __slots__ = ("versions", "truncated")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[Version]
    truncated: bool
    def __init__(self, versions: _Optional[_Iterable[_Union[Version, _Mapping]]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class GetHeadRequest(_message.Message):
    __slots__ = ("vault_id",)
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ...) -> None: ...

class GetHeadResponse(_message.Message):
    __slots__ = ("head",)
    HEAD_FIELD_NUMBER: _ClassVar[int]
    head: int
    def __init__(self, head: _Optional[int] = ...) -> None: ...

class WatchHeadRequest(_message.Message):
    __slots__ = ("vault_id",)
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ...) -> None: ...

class HeadEvent(_message.Message):
    __slots__ = ("head",)
    HEAD_FIELD_NUMBER: _ClassVar[int]
    head: int
    def __init__(self, head: _Optional[int] = ...) -> None: ...
