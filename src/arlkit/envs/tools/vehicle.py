"""A car's controls: doors, brake, engine, fuel, lights, climate, tyres, parking brake, cruise control."""

from __future__ import annotations

from typing import Any, Literal

from arlkit.envs.tools.api_base import tool

__all__ = ["Vehicle"]

DOORS = ("driver", "passenger", "rear_left", "rear_right")
TIRES = ("front_left", "front_right", "rear_left", "rear_right")
TANK_LITERS = 60.0
KM_PER_LITER = 15.0
HEALTHY_PSI = 30.0


class Vehicle:
    """One car."""

    api_name = "Vehicle"
    bfcl_names: tuple[str, ...] = ()
    description = (
        "Vehicle controls. The engine starts only with every door locked and the brake pedal fully pressed; "
        "cruise control needs the engine running and the parking brake released."
    )

    def __init__(self) -> None:
        self.engine_on = False
        self.fuel_liters = 30.0
        self.doors = {d: "unlocked" for d in DOORS}
        self.brake_pedal = 0.0
        self.parking_brake = True
        self.headlights = "off"
        self.climate = {"temperature": 21.0, "mode": "auto"}
        self.tire_pressure = {t: 33.0 for t in TIRES}
        self.cruise_speed: float | None = None

    def load_state(self, config: dict[str, Any]) -> None:
        """Any of the public attributes, by name (``engine_on``, ``fuel_liters``, ``doors``, ...)."""
        for key, value in config.items():
            if key.startswith("_") or not hasattr(self, key):
                raise ValueError(f"Vehicle: unknown state field {key!r}")
            current = getattr(self, key)
            if isinstance(current, dict):
                merged = dict(current)
                merged.update(value)
                value = merged
            setattr(self, key, value)
        self.fuel_liters = float(self.fuel_liters)
        self.tire_pressure = {k: float(v) for k, v in self.tire_pressure.items()}

    @tool
    def lock_doors(self, unlock: bool, doors: list[str]) -> dict[str, Any]:
        """Lock or unlock doors.

        Args:
            unlock: True to unlock, False to lock.
            doors: door names among 'driver', 'passenger', 'rear_left', 'rear_right'.
        """
        unknown = [d for d in doors if d not in DOORS]
        if unknown or not doors:
            return {"error": f"lock_doors: doors must be among {', '.join(DOORS)}"}
        for d in doors:
            self.doors[d] = "unlocked" if unlock else "locked"
        return {"doors": dict(self.doors)}

    @tool
    def press_brake_pedal(self, position: float) -> dict[str, Any]:
        """Press the brake pedal (0.0 released, 1.0 fully pressed).

        Args:
            position: pedal position between 0.0 and 1.0.
        """
        if not 0.0 <= position <= 1.0:
            return {"error": "press_brake_pedal: position must be between 0.0 and 1.0"}
        self.brake_pedal = position
        return {"brake_pedal": position}

    @tool
    def start_engine(self) -> dict[str, Any]:
        """Start the engine (needs all doors locked, the brake fully pressed and fuel)."""
        if self.engine_on:
            return {"error": "start_engine: the engine is already running"}
        if any(state != "locked" for state in self.doors.values()):
            return {"error": "start_engine: lock all doors first"}
        if self.brake_pedal < 1.0:
            return {"error": "start_engine: press the brake pedal fully (position 1.0) first"}
        if self.fuel_liters <= 0:
            return {"error": "start_engine: the tank is empty"}
        self.engine_on = True
        return {"engine": "running", "fuel_liters": self.fuel_liters}

    @tool
    def stop_engine(self) -> dict[str, Any]:
        """Stop the engine (cruise control switches off)."""
        if not self.engine_on:
            return {"error": "stop_engine: the engine is not running"}
        self.engine_on = False
        self.cruise_speed = None
        return {"engine": "stopped"}

    @tool
    def refuel(self, liters: float) -> dict[str, Any]:
        """Add fuel; the tank holds 60 liters.

        Args:
            liters: liters to add (positive).
        """
        if not 0 < liters <= TANK_LITERS:
            return {"error": "refuel: liters must be positive and at most the tank size"}
        if self.fuel_liters + liters > TANK_LITERS:
            return {"error": f"refuel: only {TANK_LITERS - self.fuel_liters:.1f} liters fit"}
        self.fuel_liters = round(self.fuel_liters + liters, 2)
        return {"fuel_liters": self.fuel_liters}

    @tool
    def set_headlights(self, mode: Literal["on", "off", "auto"]) -> dict[str, Any]:
        """Switch the headlights.

        Args:
            mode: 'on', 'off' or 'auto'.
        """
        self.headlights = mode
        return {"headlights": mode}

    @tool
    def set_climate(self, temperature: float, mode: Literal["auto", "cool", "heat", "fan"] = "auto") -> dict[str, Any]:
        """Set the cabin temperature (16 to 30 degrees Celsius) and climate mode.

        Args:
            temperature: target temperature in degrees Celsius.
            mode: 'auto', 'cool', 'heat' or 'fan'.
        """
        if not 16.0 <= temperature <= 30.0:
            return {"error": "set_climate: temperature must be between 16 and 30 degrees Celsius"}
        self.climate = {"temperature": temperature, "mode": mode}
        return {"climate": dict(self.climate)}

    @tool
    def check_tire_pressure(self) -> dict[str, Any]:
        """The pressure of each tyre in psi, and whether all are at least 30 psi."""
        return {
            "tire_pressure": dict(self.tire_pressure),
            "healthy": all(p >= HEALTHY_PSI for p in self.tire_pressure.values()),
        }

    @tool
    def inflate_tire(self, tire: str, psi: float) -> dict[str, Any]:
        """Set one tyre's pressure.

        Args:
            tire: 'front_left', 'front_right', 'rear_left' or 'rear_right'.
            psi: target pressure between 20 and 45 psi.
        """
        if tire not in TIRES:
            return {"error": f"inflate_tire: tire must be one of {', '.join(TIRES)}"}
        if not 20.0 <= psi <= 45.0:
            return {"error": "inflate_tire: psi must be between 20 and 45"}
        self.tire_pressure[tire] = psi
        return {"tire": tire, "psi": psi}

    @tool
    def set_parking_brake(self, engaged: bool) -> dict[str, Any]:
        """Engage or release the parking brake.

        Args:
            engaged: True to engage, False to release.
        """
        if engaged and self.cruise_speed is not None:
            return {"error": "set_parking_brake: switch off cruise control first"}
        self.parking_brake = engaged
        return {"parking_brake": "engaged" if engaged else "released"}

    @tool
    def activate_cruise_control(self, speed_kmh: float) -> dict[str, Any]:
        """Hold a speed (30 to 180 km/h); needs the engine running and the parking brake released.

        Args:
            speed_kmh: the speed to hold in km/h.
        """
        if not self.engine_on:
            return {"error": "activate_cruise_control: start the engine first"}
        if self.parking_brake:
            return {"error": "activate_cruise_control: release the parking brake first"}
        if not 30.0 <= speed_kmh <= 180.0:
            return {"error": "activate_cruise_control: speed must be between 30 and 180 km/h"}
        self.cruise_speed = speed_kmh
        return {"cruise_speed": speed_kmh}

    @tool
    def deactivate_cruise_control(self) -> dict[str, Any]:
        """Switch cruise control off."""
        if self.cruise_speed is None:
            return {"error": "deactivate_cruise_control: cruise control is off"}
        self.cruise_speed = None
        return {"cruise_speed": None}

    @tool
    def estimate_range(self) -> dict[str, Any]:
        """Kilometres the fuel in the tank lasts (15 km per liter)."""
        return {"range_km": round(self.fuel_liters * KM_PER_LITER, 1)}

    @tool
    def get_vehicle_status(self) -> dict[str, Any]:
        """Engine, fuel, doors, brakes, lights, climate and cruise control at a glance."""
        return {
            "engine_on": self.engine_on,
            "fuel_liters": self.fuel_liters,
            "doors": dict(self.doors),
            "brake_pedal": self.brake_pedal,
            "parking_brake": self.parking_brake,
            "headlights": self.headlights,
            "climate": dict(self.climate),
            "cruise_speed": self.cruise_speed,
        }
