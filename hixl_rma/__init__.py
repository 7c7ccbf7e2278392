"""hixl_rma: one-sided RMA with MPI's semantics, moved by a HIXL engine on UCX."""
from ._ucx import load as _load_ucx

UCX_VERSION, UCX_ORIGIN = _load_ucx()

from ._engine import (  # noqa: E402  (UCX must be loaded first)
    MEM_DEVICE, MEM_HOST, OPTION_JOB_TOKEN, OPTION_TIMEOUT_MS, READ, TRANSFER_COMPLETED,
    TRANSFER_FAILED, TRANSFER_WAITING, WRITE, Engine, MemHandle,
    TransferRequest, default_timeout_ms)
from .errors import (  # noqa: E402
    ALREADY_CONNECTED, FAILED, NOT_CONNECTED, NOTIFY_FAILED, PARAM_INVALID, PEER_FAILURE,
    RESOURCE_EXHAUSTED, SUCCESS, TIMEOUT, UNSUPPORTED, AccessError, BoundsError, DatatypeError,
    EpochError, HixlError, HixlTimeoutError, NotConnectedError, ParamError, PeerFailure,
    ResourceError, UnsupportedError)

__version__ = "0.1.0"
from .comm import Communicator  # noqa: E402
from .constants import *  # noqa: E402,F401,F403
from .request import Request  # noqa: E402
from .runtime import Finalize, Init, Is_initialized  # noqa: E402
from .win import Get_address, Win  # noqa: E402
from .hixl_api import (  # noqa: E402
    Connect, DeregisterMemory, Fence, Get, GetRank, GetSize, GetWorldCommunicator, MemoryHandle, Put,
    RegisterMemory)
from .hixl_api import Finalize  # noqa: E402,F811  (also deregisters HIXL-style handles)
from .ops import (BAND, BOR, BXOR, LAND, LOR, LXOR, MAX, MAXLOC, MIN, MINLOC, NO_OP, PROD,  # noqa: E402
                  REPLACE, SUM, Op)
